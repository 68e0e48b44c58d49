"""The report writer of ``make reproduce``: committed full-run verdicts beside this run's."""

import importlib.util
from pathlib import Path

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
            {"text": "A beats B", "passed": True, "measured": "1 vs 2"},
            {"text": "A is fast", "passed": None, "measured": "not measured in --quick"},
        ]
    )
    full = _rec(
        [
            {"text": "A beats B", "passed": False, "measured": "3 vs 2"},
            {"text": "A is fast", "passed": True, "measured": "9 s"},
            {"text": "full only", "passed": True, "measured": "x"},
        ]
    )
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "toy.png").write_bytes(b"")
    text = _load()._report(
        [
            ("pkg", "claims not all held", 3.0, [quick], [full]),
            ("other", "error: exit 1, no record", 1.0, [], []),
        ],
        full=False,
        out_root=tmp_path,
    )
    assert "**Full-scale claims (committed full-run records):** 2 of 3 held (1 failed" in text
    assert "**Claims of this quick run:** 1 of 2 held (0 failed, 1 not measured)" in text
    assert (
        "| pkg | toy | A beats B | 3 vs 2 | **failed** | 1 vs 2 | held | [png](pkg/toy.png) |"
        in text
    )
    assert "| pkg | toy | A is fast | 9 s | held | not measured in --quick | not measured |" in text
    assert "| pkg | toy | full only | x | held | — | — |" in text
    assert "| other | error: exit 1, no record | 1 s |" in text
    assert "not the full-scale verdicts" in text
