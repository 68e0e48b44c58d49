"""Regenerate the README's reproduction tables from bench/results/*.json (no hand-typed numbers)."""

from __future__ import annotations

from pathlib import Path

from methodkit.bench import claims_table, load_record, records_table, write_readme_block

HERE = Path(__file__).resolve().parent
ORDER = ["arith_rl", "peak_memory"]
KEEP = {
    "acc_rl_test",
    "acc_ood",
    "rollouts",
    "seconds",
    "s_per_iter",
    "peak_MiB",
    "peak_MiB_above_setup",
}


def main() -> None:
    records = []
    for name in ORDER:
        path = HERE / "results" / f"{name}.json"
        if path.exists():
            rec = load_record(path)
            rec["results"] = [r for r in rec["results"] if r["metric"] in KEEP]
            records.append(rec)
    wall = sum(r["wall_time_s"] for r in records) / 60
    cmd = records[0]["command"] if records else ""
    body = (
        f"Generated from `bench/results/*.json` by `bench/readme_table.py` (command: `{cmd}`, "
        f"total wall time {wall:.0f} min on a shared, oversubscribed 2-core machine, "
        "1 torch thread; configuration in the JSON files).\n\n"
        + records_table(records)
        + "\n\nClaims:\n\n"
        + claims_table(records)
        + "\n\n![accuracy](bench/results/arith_rl.png)\n"
        + "![reward curves](bench/results/arith_rl_curves.png)\n"
        + "![memory](bench/results/peak_memory.png)\n"
    )
    write_readme_block(HERE.parent / "README.md", body)


if __name__ == "__main__":
    main()
