"""Regenerate the README's reproduction tables from bench/results/*.json (never typed by hand)."""

from __future__ import annotations

import re
from pathlib import Path

from methodkit.bench import claims_table, load_record, records_table

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
block = "<!-- table:start -->\n" + "\n".join(lines) + "\n<!-- table:end -->"
text = README.read_text()
text = re.sub(r"<!-- table:start -->.*?<!-- table:end -->", lambda _: block, text, flags=re.DOTALL)
README.write_text(text)
print(block)
