"""The report writer of ``make reproduce`` renders every claim and every failure."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location("reproduce", ROOT / "scripts" / "reproduce.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_report_lists_claims_and_errors(tmp_path):
    rec = {
        "benchmark": "toy",
        "wall_time_s": 3.0,
        "claim": {"text": "A beats B", "passed": True, "measured": "1 vs 2"},
        "claims": [
            {"text": "A beats B", "passed": True, "measured": "1 vs 2"},
            {"text": "A is fast", "passed": False, "measured": "9 s"},
        ],
    }
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "toy.png").write_bytes(b"")
    text = _load()._report(
        [("pkg", "claim failed", 3.0, [rec]), ("other", "error: exit 1, no record", 1.0, [])],
        full=False,
        out_root=tmp_path,
    )
    assert "| pkg | toy | A beats B | 1 vs 2 | yes | [png](pkg/toy.png) | 3 s |" in text
    assert "| pkg | toy | A is fast | 9 s | **no** |" in text
    assert "| other | — | error: exit 1, no record |" in text
