"""Plot labels and the before-fix rows of the eo-wm benchmark (not shipped in the wheel)."""

from __future__ import annotations

import json
from pathlib import Path

from methodkit.bench import ResultRow

LABELS = {
    "es_dae": "Extreme Summer drop amplitude error",
    "sp_dhr": "seasonal pairs: directional hit rate",
    "cf_dhr": "counterfactual pairs: directional hit rate",
    "ndvi_mae": "NDVI mean absolute error",
    "ndvi_crps": "NDVI trajectory CRPS",
    "swap_ratio": "swap: forecast / true NDVI change",
    "swap_mae_increase_pct": "swap: NDVI MAE increase",
    "dose_ratio": "dose: trough slope / simulator's",
    "dose_lower_share": "dose: lower trough at 2x anomaly",
}
UNITS = {
    "es_dae": "NDVI",
    "sp_dhr": "fraction of steps",
    "cf_dhr": "fraction of steps",
    "ndvi_mae": "NDVI",
    "ndvi_crps": "NDVI",
    "swap_ratio": "ratio",
    "swap_mae_increase_pct": "%",
    "dose_ratio": "ratio",
    "dose_lower_share": "share of windows",
}


BEFORE_FIX = Path(__file__).parent / "results" / "before_fix"


def before_fix_rows(benchmark: str, quick: bool, seeds: list[int]) -> tuple[list[ResultRow], dict]:
    """EO-WM's rows from the record of the code before the weather fix (commit 5aea076).

    Shown as ``eo_wm_before_fix`` next to the fixed model; nothing is recomputed or edited:
    the values are that record's values for the seeds of this run (same worlds), and its
    command and commit are kept.
    """
    path = BEFORE_FIX / f"{benchmark}.json"
    if quick or not path.exists():
        return [], {}
    rec = json.loads(path.read_text())
    keep = [i for i, sd in enumerate(rec["seeds"]) if sd in seeds]
    if not keep:
        return [], {}
    rows = [
        ResultRow.from_values(
            "eo_wm_before_fix",
            r["metric"],
            [r["values"][i] for i in keep],
            higher_is_better=r.get("higher_is_better"),
        )
        for r in rec["results"]
        if r["method"] == "eo_wm" and len(r["values"]) == len(rec["seeds"])
    ]
    info = {
        "record": f"bench/results/before_fix/{benchmark}.json",
        "seeds": [rec["seeds"][i] for i in keep],
        "command": rec.get("command"),
        "commit": rec.get("git_commit"),
        "steps": rec["config"].get("steps"),
    }
    return rows, info
