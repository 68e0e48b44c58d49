"""Render the README reproduction table from bench/results/*.json (never typed by hand).

python bench/readme_table.py [RESULTS_DIR]   # rewrites the block between the markers
"""

from __future__ import annotations

import sys
from pathlib import Path

from methodkit.bench import claims_table, load_record, records_table, write_readme_block


def main() -> None:
    here = Path(__file__).resolve().parent
    results = Path(sys.argv[1]) if len(sys.argv) > 1 else here / "results"
    records = [load_record(p) for p in sorted(results.glob("*.json"))]
    wall = sum(r["wall_time_s"] for r in records)
    cmds = sorted({r["command"] for r in records})
    block = "\n".join(
        [
            f"Commands: {'; '.join(f'`{c}`' for c in cmds)}. Summed wall time "
            f"{wall / 60:.0f} min (machine: {records[0]['environment'].get('cpu_count')} "
            f"cores, {records[0]['environment'].get('threads')} thread, shared with other jobs). "
            "Tables generated from `bench/results/*.json`:",
            "",
            records_table(records),
            "",
            claims_table(records),
            "",
            *[f"![{r['benchmark']}](bench/results/{r['benchmark']}.png)" for r in records],
        ]
    )
    write_readme_block(here.parent / "README.md", block)


if __name__ == "__main__":
    main()
