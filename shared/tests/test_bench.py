import json

import numpy as np
import pytest

from methodkit.bench import (
    BenchRecord,
    Claim,
    ResultRow,
    bench_parser,
    claims_table,
    load_record,
    plot_results,
    records_table,
    save_record,
    validate_record,
)
from methodkit.bench._plot import axis_label


def _env():
    from methodkit.bench import environment

    return {**environment(), "load_avg_start": [0.1, 0.2, 0.3], "load_avg_end": None}


def _record(passed=True):
    rows = [
        ResultRow.from_values("ours", "error", [0.1, 0.2, 0.3], higher_is_better=False),
        ResultRow.from_values("baseline", "error", [0.5, 0.5, 0.5], higher_is_better=False),
        ResultRow.from_values("ours", "time_s", [1.0]),
    ]
    return BenchRecord(
        package="methodkit",
        benchmark="toy",
        config={"n": 3},
        seeds=[0, 1, 2],
        results=rows,
        claims=[Claim("ours beats baseline", passed, measured="0.2 vs 0.5")],
        wall_time_s=1.5,
        environment=_env(),
    )


def test_from_values_uses_sample_std():
    row = ResultRow.from_values("m", "x", [1.0, 2.0, 3.0])
    assert row.mean == pytest.approx(2.0)
    assert row.std == pytest.approx(np.std([1, 2, 3], ddof=1))
    assert row.n == 3
    assert ResultRow.from_values("m", "x", [4.0]).std == 0.0
    with pytest.raises(ValueError, match="no values"):
        ResultRow.from_values("m", "x", [])


def test_save_and_load_round_trip(tmp_path):
    path = save_record(_record(), tmp_path)
    assert path.name == "toy.json"
    data = load_record(path)
    assert data["schema"] == 2
    assert data["version"]  # methodkit's own installed version
    assert data["environment"]["threads"] == 1
    assert data["results"][0]["values"] == [0.1, 0.2, 0.3]
    assert "values" in data["results"][2]
    assert data["claims"] == [
        {"text": "ours beats baseline", "passed": True, "measured": "0.2 vs 0.5"}
    ]
    assert "claim" not in data
    assert "--out" not in data["command"]


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d.pop("claims"), "lacks field 'claims'"),
        (lambda d: d.update(schema=1), "schema 1 is not 2"),
        (lambda d: d.update(claims=[]), "no claims"),
        (lambda d: d.update(command="bench/run.py --out /tmp/x"), "--out"),
        (lambda d: d["environment"].pop("load_avg_start"), "load_avg_start"),
        (lambda d: d.update(results=[]), "no results"),
        (lambda d: d["results"][0].pop("mean"), "results\\[0\\]"),
        (lambda d: d.update(seeds="0"), "'seeds' has type str"),
        (lambda d: d["claims"][0].update(passed="yes"), "'passed' true/false/null"),
    ],
)
def test_validate_rejects_broken_records(mutate, match):
    data = json.loads(json.dumps(_record().to_dict()))
    mutate(data)
    with pytest.raises(ValueError, match=match):
        validate_record(data)


def test_nan_results_are_saved_as_not_measured(tmp_path):
    rec = _record()
    rec.results.append(ResultRow("bad", "error", float("nan"), 0.0, 1))
    data = json.loads(save_record(rec, tmp_path).read_text())
    assert data["results"][-1]["mean"] is None
    assert data["results"][-1]["std"] is None
    validate_record(data)
    assert "| toy | bad | error | not measured | 1 |" in records_table([data])


def test_validate_rejects_a_non_finite_or_half_missing_row():
    data = json.loads(json.dumps(_record().to_dict()))
    data["results"][0]["std"] = None
    with pytest.raises(ValueError, match="results\\[0\\] lacks a valid 'std'"):
        validate_record(data)


def test_tables_render_every_row_and_claim():
    data = _record(passed=False).to_dict()
    table = records_table([data])
    assert table.count("\n") == 2 + 3 - 1
    assert "| toy | ours | error ↓ | 0.2 ± 0.1 | 3 |" in table
    claims = claims_table([data])
    assert "ours beats baseline" in claims
    assert "**no**" in claims


def test_tables_escape_pipes():
    data = _record().to_dict()
    data["claims"] = [{"text": "max |a - b| small", "passed": True, "measured": "|x| = 0"}]
    row = claims_table([data]).splitlines()[-1]
    assert row == "| toy | max \\|a - b\\| small | \\|x\\| = 0 | yes |"


def test_parser_defaults():
    args = bench_parser("x").parse_args([])
    assert (args.out, args.seeds, args.quick, args.threads) == (
        "bench/results",
        [0, 1, 2],
        False,
        1,
    )
    args = bench_parser("x").parse_args(["--quick", "--seeds", "4", "--out", "o"])
    assert (args.quick, args.seeds, args.out) == (True, [4], "o")


def test_plot_axis_labels_say_what_and_which_way_is_better():
    rows = [{"method": "a", "metric": "auroc", "higher_is_better": True}]
    assert axis_label("auroc", rows, {}, {"auroc": "subtle AUROC"}) == (
        "subtle AUROC\n(higher is better)"
    )
    assert axis_label("time_s", [{"higher_is_better": False}], {"time_s": "s"}, {}) == (
        "time s [s]\n(lower is better)"
    )


def test_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = plot_results(_record().to_dict(), tmp_path / "toy.png", units={"time_s": "s"})
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="no results for metric"):
        plot_results(_record().to_dict(), tmp_path / "x.png", metrics=["missing"])
