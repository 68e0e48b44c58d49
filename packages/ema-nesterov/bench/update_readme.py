"""Regenerate the README's reproduction tables from bench/results/*.json (never typed by hand)."""

from __future__ import annotations

from pathlib import Path

from methodkit.bench import claims_table, load_record, records_table, write_readme_block

HERE = Path(__file__).resolve().parent
README = HERE.parent / "README.md"

records = [load_record(p) for p in sorted((HERE / "results").glob("*.json"))]
lines = []
for rec in records:
    lines.append(
        f"`{rec['benchmark']}` ({rec['command']}, {rec['wall_time_s'] / 60:.1f} min, "
        f"{rec['environment'].get('threads')} thread(s), torch {rec['environment'].get('torch')}):"
    )
lines += ["", records_table(records), "", claims_table(records)]
block = "\n".join(lines)
write_readme_block(README, block)
print(block)
