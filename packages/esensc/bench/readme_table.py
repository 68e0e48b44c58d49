"""Render the README's reproduction tables from the committed records (never typed by hand).

Usage (from the package folder): ``python bench/readme_table.py [--write]``; with ``--write``
the block between the ``<!-- bench-table -->`` markers in README.md is replaced.
"""

from __future__ import annotations

import sys
from pathlib import Path

from methodkit.bench import claims_table, load_record, records_table

HERE = Path(__file__).resolve().parent
ORDER = ["diabetes_mlp", "diabetes_xgb", "wine_mlp", "breast_cancer_xgb", "friedman1_scaling"]
MAIN = {"esensc", "esensc_plain", "kernel@1x", "kernel@2x", "kernel_noL1@1x", "permutation@1x"}


def render() -> str:
    records = [load_record(HERE / "results" / f"{name}.json") for name in ORDER]
    compact = []
    for rec in records:
        rows = [
            r
            for r in rec["results"]
            if rec["benchmark"] == "friedman1_scaling"
            or (r["method"] in MAIN and r["metric"] in ("deviation", "spearman"))
        ]
        compact.append({**rec, "results": rows})
    seeds = records[0]["seeds"]
    wall = sum(r["wall_time_s"] for r in records) / 60
    return "\n".join(
        [
            f"Seeds {seeds}; total benchmark wall time {wall:.1f} min "
            f"(`{records[0]['command']}`, {records[0]['environment']['threads']} thread).",
            "",
            records_table(compact),
            "",
            claims_table(records),
            "",
            "<details><summary>All methods and metrics (top-5 overlap, wall time, every "
            "KernelSHAP / permutation budget, ES / ENSC variants)</summary>",
            "",
            records_table(records[:-1]),
            "",
            "</details>",
        ]
    )


def main() -> int:
    text = render()
    if "--write" not in sys.argv:
        print(text)
        return 0
    readme = HERE.parent / "README.md"
    src = readme.read_text()
    start, end = "<!-- bench-table -->", "<!-- /bench-table -->"
    i, j = src.index(start) + len(start), src.index(end)
    readme.write_text(src[:i] + "\n" + text + "\n" + src[j:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
