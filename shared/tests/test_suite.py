"""run_suite, claim verdicts, the README generator and the record upgrade."""

import json
import math
import textwrap

import pytest

from methodkit.bench import (
    Claim,
    Outcome,
    ResultRow,
    check,
    compare,
    enforce_measured,
    load_record,
    run_suite,
)
from methodkit.bench import readme as readme_gen
from methodkit.bench.upgrade import upgrade_record

NAN = float("nan")


@pytest.mark.parametrize(
    ("claim", "passed"),
    [
        (compare("a <= b", 1.0, "<=", 2.0), True),
        (compare("a <= b", 3.0, "<=", 2.0), False),
        (compare("a <= 0.5 b + 1", 1.9, "<=", 2.0, scale=0.5, margin=1.0), True),
        (compare("a <= b", 1.0, "<=", NAN), None),  # `not 1 > nan` would be True
        (compare("a >= b", NAN, ">=", 1.0), None),
        (compare("a >= b", None, ">=", 1.0), None),
        (compare("a >= b", 0.0, ">=", 0.0), None),  # both at the floor: degenerate
        (compare("a >= b", math.inf, ">=", 1.0), None),
        (check("x", True, inputs=[1.0, 2.0]), True),
        (check("x", True, inputs=[1.0, NAN]), None),
        (check("x", False, inputs=[1.0, None]), None),
        (check("x", True, inputs=[1.0], degenerate=True), None),
        (check("x", False, inputs=[1.0]), False),
        # without inputs, NaN in the evidence or as the verdict itself is never "held"
        (check("x <= 1", not (NAN > 1.0), "nan vs 1"), None),
        (check("x <= 1", True, "x = -inf"), None),
        (check("x", NAN), None),  # bool(nan) is True
        (check("x", True, "0.5 vs 1 (financial)"), True),
    ],
)
def test_claim_verdicts_never_pass_on_missing_or_degenerate_input(claim, passed):
    assert claim.passed is passed
    assert claim.status == {True: "held", False: "failed", None: "not measured"}[passed]


def test_compare_rejects_unknown_operator():
    with pytest.raises(ValueError, match="op must be one of"):
        compare("x", 1.0, "==", 1.0)


def test_enforce_measured_refuses_a_hand_made_pass_on_nan():
    hand_made = Claim("ours <= perm", True, "0.1 vs nan", inputs=(0.1, NAN))
    assert enforce_measured(hand_made).passed is None
    assert enforce_measured(Claim("ok", True, inputs=(0.1,))).passed is True


def _toy(values, claim):
    def fn(args):
        rows = [ResultRow.from_values("ours", "err", values[: len(args.seeds)], False)]
        return Outcome(config={"n": 1}, results=rows, claims=[claim])

    return fn


def test_run_suite_writes_records_plots_and_exit_codes(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    held = _toy([0.1, 0.2], compare("ours <= base", 0.1, "<=", 0.5))
    failed = _toy([0.1, 0.2], compare("ours <= base", 0.9, "<=", 0.5))
    unmeasured = _toy([0.1, 0.2], check("memory", True, inputs=[NAN]))
    out = tmp_path / "out"
    common = ["--out", str(out), "--seeds", "0", "1"]
    assert run_suite("methodkit", {"a": held}, common, bench_dir=tmp_path) == 0
    rec = load_record(out / "a.json")
    assert rec["seeds"] == [0, 1]
    assert rec["config"] == {"n": 1, "quick": False}
    assert rec["environment"]["load_avg_start"] is not None
    assert "--out" not in rec["command"]
    assert (out / "a.png").is_file()
    assert run_suite("methodkit", {"b": failed}, common, bench_dir=tmp_path) == 1
    assert run_suite("methodkit", {"c": unmeasured}, common, bench_dir=tmp_path) == 1
    assert load_record(out / "c.json")["claims"][0]["passed"] is None
    # --quick reports but never fails; --only picks benchmarks
    suite = {"a": held, "b": failed}
    assert run_suite("methodkit", suite, [*common, "--quick", "--only", "b"]) == 0
    captured = capsys.readouterr()
    assert "full run only" in captured.out
    assert "running b (quick run)" in captured.err
    assert load_record(out / "b.json")["claims"][0] == {
        "text": "ours <= base",
        "passed": None,
        "measured": "0.9 vs 0.5",
        "inputs": [0.9, 0.5],
        "full_run_only": True,
    }


def test_quick_runs_judge_only_claims_marked_quick(tmp_path):
    pytest.importorskip("matplotlib")
    exact = compare("error <= 1e-6", 1e-9, "<=", 1e-6, quick=True)
    accuracy = compare("acc >= 0.9", 0.5, ">=", 0.9)
    fn = _toy([0.1], exact)
    both = _toy([0.1], accuracy)
    out = tmp_path / "q"
    args = ["--out", str(out), "--seeds", "0", "--quick"]
    assert run_suite("methodkit", {"e": fn, "a": both}, args, bench_dir=tmp_path) == 0
    assert load_record(out / "e.json")["claims"][0]["passed"] is True
    assert load_record(out / "a.json")["claims"][0]["passed"] is None
    # a full run judges every claim
    assert run_suite("methodkit", {"a": both}, args[:-1], bench_dir=tmp_path) == 1
    assert load_record(out / "a.json")["claims"][0]["passed"] is False


def test_a_nan_result_is_recorded_as_not_measured_not_a_crash(tmp_path, capsys):
    pytest.importorskip("matplotlib")

    def fn(args):
        rows = [
            ResultRow.from_values("ours", "err", [NAN, 0.2], False),
            ResultRow.from_values("base", "err", [0.3, 0.4], False),
        ]
        return Outcome(config={}, results=rows, claims=[compare("ours <= base", NAN, "<=", 0.3)])

    out = tmp_path / "n"
    assert run_suite("methodkit", {"n": fn}, ["--out", str(out), "--seeds", "0", "1"]) == 1
    rec = load_record(out / "n.json")
    assert rec["results"][0]["mean"] is None
    assert rec["results"][0]["values"] == [None, 0.2]
    assert rec["claims"][0]["passed"] is None
    assert "not measured" in capsys.readouterr().out
    assert (out / "n.png").is_file()


def test_run_suite_defaults_out_to_the_bench_folder_and_draws_extra_plots(tmp_path):
    pytest.importorskip("matplotlib")
    drawn = []

    def fn(args):
        return Outcome(
            config={},
            results=[ResultRow.from_values("m", "x", [1.0])],
            claims=[check("c", True, inputs=[1.0])],
            extra_plots={"curve": lambda rec, path: drawn.append(path) or path.write_bytes(b"p")},
        )

    assert run_suite("methodkit", {"t": fn}, ["--seeds", "0"], bench_dir=tmp_path) == 0
    assert (tmp_path / "results" / "t.json").is_file()
    assert drawn == [tmp_path / "results" / "t_curve.png"]


def test_run_suite_rejects_a_benchmark_without_claims(tmp_path):
    def fn(args):
        return Outcome(config={}, results=[ResultRow.from_values("m", "x", [1.0])], claims=[])

    with pytest.raises(ValueError, match="checked no claim"):
        run_suite("methodkit", {"t": fn}, ["--out", str(tmp_path)], bench_dir=tmp_path)


def _package(tmp_path, spec=""):
    pkg = tmp_path / "demo"
    (pkg / "bench" / "results").mkdir(parents=True)
    rows = [
        ResultRow.from_values("ours", "err", [0.1, 0.3], False),
        ResultRow.from_values("base", "err", [0.5, 0.5], False),
        ResultRow.from_values("ours", "time_s", [2.0, 2.0]),
    ]

    def fn(args):
        return Outcome(
            config={"per_seed": [{"seed": 0, "acc": 0.5}, {"seed": 1, "acc": 0.25}]},
            results=rows,
            claims=[compare("ours <= base", 0.2, "<=", 0.5)],
        )

    run_suite("methodkit", {"toy": fn}, ["--seeds", "0", "1"], bench_dir=pkg / "bench")
    (pkg / "bench" / "readme.toml").write_text(textwrap.dedent(spec))
    (pkg / "README.md").write_text("# demo\n\n<!-- bench:start -->\nold\n<!-- bench:end -->\nend\n")
    return pkg


def test_readme_generator_renders_the_declared_sections(tmp_path):
    pytest.importorskip("matplotlib")
    pkg = _package(
        tmp_path,
        """
        [[section]]
        kind = "pivot"
        record = "toy"
        [[section]]
        kind = "rows"
        record = "toy"
        path = "per_seed"
        columns = ["seed", "acc"]
        title = "Per seed:"
        [[section]]
        kind = "claims"
        details = "claims"
        [[section]]
        kind = "plots"
        """,
    )
    assert readme_gen.main([str(pkg), "--check"]) == 1
    assert readme_gen.write(pkg)
    text = (pkg / "README.md").read_text()
    assert "| ours | 0.2 ± 0.1414 | 2 ± 0 |" in text
    assert "| base | 0.5 ± 0 | — |" in text
    assert "Per seed:\n\n| seed | acc |\n|---|---|\n| 0 | 0.5 |\n| 1 | 0.25 |" in text
    assert "<details><summary>claims</summary>" in text
    assert "![toy](bench/results/toy.png)" in text
    assert text.endswith("<!-- bench:end -->\nend\n")
    assert "old" not in text
    assert readme_gen.main([str(pkg), "--check"]) == 0
    assert not readme_gen.write(pkg)


def test_readme_generator_errors(tmp_path):
    pytest.importorskip("matplotlib")
    pkg = _package(tmp_path, '[[section]]\nkind = "bars"\n')
    with pytest.raises(ValueError, match="kind 'bars'"):
        readme_gen.render(pkg)
    (pkg / "bench" / "readme.toml").write_text('[[section]]\nkind = "pivot"\n')
    with pytest.raises(ValueError, match="needs 'record'"):
        readme_gen.render(pkg)
    (pkg / "bench" / "readme.toml").write_text('records = ["nope"]\n')
    with pytest.raises(FileNotFoundError, match="nope"):
        readme_gen.render(pkg)
    (pkg / "bench" / "readme.toml").write_text("")
    (pkg / "README.md").write_text("# demo\n<!-- bench:end -->\n<!-- bench:start -->\n")
    with pytest.raises(ValueError, match="exactly one"):
        readme_gen.write(pkg)


def _schema1():
    claim = {"text": "headline", "passed": False, "measured": "0.3"}
    return {
        "schema": 1,
        "package": "demo",
        "version": "0.1.0",
        "benchmark": "b",
        "created_utc": "2026-11-30T10:00:00Z",
        "git_commit": "abc",
        "command": "run.py --seeds 0 1 --out /tmp/scratch --threads 1",
        "environment": {"threads": 1},
        "config": {"lr": 0.1},
        "seeds": [0, 1],
        "wall_time_s": 12.5,
        "results": [{"method": "m", "metric": "x", "mean": 0.25, "std": 0.1, "n": 2}],
        "claim": claim,
        "claims": [claim, {"text": "second", "passed": True, "measured": ""}],
    }


def test_upgrade_keeps_every_number_and_each_claim_once():
    old = _schema1()
    new = upgrade_record(old)
    assert new["schema"] == 2
    assert "claim" not in new
    assert [c["text"] for c in new["claims"]] == ["headline", "second"]
    assert new["command"] == "run.py --seeds 0 1 --threads 1"
    assert new["environment"] == {"threads": 1, "load_avg_start": None, "load_avg_end": None}
    for key in ("results", "config", "wall_time_s", "seeds", "created_utc"):
        assert new[key] == old[key]
    assert upgrade_record(new) == new
    lone = {**_schema1(), "claims": []}
    assert [c["text"] for c in upgrade_record(lone)["claims"]] == ["headline"]
    with pytest.raises(ValueError, match="cannot upgrade schema 7"):
        upgrade_record({**old, "schema": 7})


def test_upgrade_cli_rewrites_in_place(tmp_path):
    from methodkit.bench.upgrade import main

    path = tmp_path / "b.json"
    path.write_text(json.dumps(_schema1()))
    assert main([str(path)]) == 0
    assert load_record(path)["schema"] == 2
