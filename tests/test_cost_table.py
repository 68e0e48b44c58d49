"""The root README's "cost at a glance" table is generated from the committed cost records."""

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location("cost_table", ROOT / "scripts" / "cost_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _entry(**kw):
    e = {
        "axis": "time per step", "unit": "s", "lower_is_better": True,
        "method": "ours", "value": 2.0, "peer": "theirs", "peer_value": 1.0, "ratio": 2.0,
        "statistic": "median of 5 interleaved reps", "reps": 5, "load_avg": [1.5, 1.2, 1.0],
    }  # fmt: skip
    e.update(kw)
    return e


def _write(root, pkg, name, cost, claims=None):
    d = root / "packages" / pkg / "bench" / "results"
    d.mkdir(parents=True, exist_ok=True)
    rec = {"config": {"cost": cost}, "claims": claims or [{"text": "x", "passed": True}]}
    (d / f"{name}.json").write_text(json.dumps(rec))


def test_readme_cost_block_is_generated_from_the_records():
    mod = _load()
    text = (ROOT / "README.md").read_text()
    assert mod.rewrite(text, mod.block()) == text, "run: python scripts/cost_table.py"


def test_one_row_per_package_headline_first_cost_json_preferred(tmp_path):
    mod = _load()
    _write(tmp_path, "alpha", "aaa_other", [_entry(method="old")])
    _write(tmp_path, "alpha", "cost", [_entry(), _entry(method="second")])
    _write(
        tmp_path,
        "beta",
        "step_time",
        [_entry(ratio=None, value=None)],
        [{"text": "a", "passed": False}, {"text": "b", "passed": None}],
    )
    (tmp_path / "packages" / "gamma").mkdir()  # no records: no row
    rows = mod.table(tmp_path).splitlines()[2:]
    assert len(rows) == 2
    assert "ours: 2" in rows[0]
    assert "2x" in rows[0]
    assert "1 held, 0 failed" in rows[0]
    assert "| 1.50 |" in rows[0]
    assert "(lower is better)" in rows[0]
    assert "not measured" in rows[1]
    assert "0 held, 1 failed, 1 not measured" in rows[1]


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"axis": "t"}, "lacks 'unit'"),
        (_entry(ratio=float("nan")), "'ratio' must be a finite number"),
        (_entry(peer=""), "'peer' must be a non-empty string"),
        ([1, 2], "must be a dict"),
    ],
)
def test_bad_cost_entries_are_named(entry, match):
    with pytest.raises(ValueError, match=match):
        _load().validate_entry(entry, "rec.json")


def test_missing_markers_raise():
    with pytest.raises(ValueError, match="lacks <!-- cost:start -->"):
        _load().rewrite("# README\n", "block")
