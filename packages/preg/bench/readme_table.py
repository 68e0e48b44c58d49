"""Write the committed records' tables into README.md between the results markers."""

from pathlib import Path

from methodkit.bench import claims_table, load_record, records_table, write_readme_block

HERE = Path(__file__).resolve().parent
records = [load_record(p) for p in sorted((HERE / "results").glob("*.json"))]
body = "\n\n".join(
    [
        "Generated from `bench/results/*.json` by `bench/readme_table.py` "
        "(command: `" + records[0]["command"] + "`).",
        claims_table(records),
        records_table(records),
    ]
)
write_readme_block(HERE.parent / "README.md", body, name="results")
