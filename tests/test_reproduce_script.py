"""The report writer of ``make reproduce``: committed full-run verdicts beside this run's."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location("reproduce", ROOT / "scripts" / "reproduce.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rec(claims):
    return {"benchmark": "toy", "wall_time_s": 3.0, "claims": claims}


def test_report_puts_full_run_verdicts_beside_the_quick_run(tmp_path):
    quick = _rec(
        [
            {"text": "A beats B", "passed": None, "measured": "1 vs 2", "full_run_only": True},
            {"text": "A is exact", "passed": True, "measured": "1e-12"},
            {"text": "A is fast", "passed": None, "measured": "not measured in --quick"},
        ]
    )
    full = _rec(
        [
            {"text": "A beats B", "passed": False, "measured": "3 vs 2"},
            {"text": "A is exact", "passed": True, "measured": "1e-13"},
            {"text": "A is fast", "passed": True, "measured": "9 s"},
        ]
    )
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "toy.png").write_bytes(b"")
    text = _load()._report(
        [
            ("pkg", "ran", 3.0, [quick], [full]),
            ("other", "error: exit 1, no record", 1.0, [], []),
        ],
        full=False,
        out_root=tmp_path,
    )
    head = text.split("| package | benchmark")[0]
    assert "**Packages that ran end to end:** 1 of 2." in head
    assert "**Full-scale claims (committed full-run records):** 2 of 3 held (1 failed" in head
    assert "1 of 2 held (0 failed, 1 not measured); 1 full run only" in head
    assert "| pkg | ran | 3 s | 2 of 3 held (1 failed, 0 not measured) |" in head
    assert "| other | error: exit 1, no record | 1 s | none | none |" in head
    assert (
        "| pkg | toy | A beats B | 3 vs 2 | **failed** | 1 vs 2 | full run only "
        "| [png](pkg/toy.png) |" in text
    )
    assert "| pkg | toy | A is fast | 9 s | held | not measured in --quick | not measured |" in text
    assert "It judges only claims that hold at any scale" in text


_TOY_BENCH = """
from methodkit.bench import Outcome, ResultRow, compare, run_suite

def toy(args):
    value = float("nan") if {nan} else 0.9
    rows = [ResultRow.from_values("ours", "err", [value], False)]
    return Outcome(config={{}}, results=rows, claims=[compare("err <= 0.5", value, "<=", 0.5)])

raise SystemExit(run_suite("toy", {{"toy": toy}}, bench_dir=".") if {ok} else 3)
"""


@pytest.mark.parametrize(
    ("full", "nan", "ok", "status"),
    [
        (False, False, True, "ran"),  # the claim failed: still ran
        (True, False, True, "ran"),  # a full run exits 1 on a failed claim: still ran
        (False, True, True, "ran"),  # a NaN result is "not measured", never a crash
        (False, False, False, "error: exit 3, no record"),
    ],
)
def test_a_package_that_ran_is_ok_whatever_its_verdicts(tmp_path, full, nan, ok, status):
    mod = _load()
    pkg = tmp_path / "pkg"
    (pkg / "bench").mkdir(parents=True)
    (pkg / "bench" / "run.py").write_text(_TOY_BENCH.format(nan=nan, ok=ok))
    got, _wall, records = mod._run_one(pkg, tmp_path / "out", full=full, timeout_s=120)
    assert got == status, (tmp_path / "out" / "run.log").read_text()
    if ok:
        (claim,) = records[0]["claims"]
        expected = None if (nan or not full) else False
        assert claim["passed"] is expected
        assert claim.get("full_run_only", False) is (not full)
