"""Regenerate the README's reproduction tables from bench/results/*.json (no hand-typed numbers)."""

from __future__ import annotations

from pathlib import Path

from methodkit.bench import claims_table, load_record, records_table, write_readme_block

HERE = Path(__file__).resolve().parent
ORDER = ["forward_passes_A", "forward_passes_B", "engine_ablation", "peak_memory"]
KEEP = {
    "fwd_to_target (budget if missed)",
    "fwd_at_best_lr",
    "fwd_ratio_best_lr",
    "peak_MiB_above_torch_import",
    "steps_to_target (fwd+bwd each)",
}


def main() -> None:
    records = []
    for name in ORDER:
        path = HERE / "results" / f"{name}.json"
        if path.exists():
            rec = load_record(path)
            rec["results"] = [r for r in rec["results"] if r["metric"] in KEEP]
            records.append(rec)
    runs = "; ".join(
        f"`{r['benchmark']}`: `{r['command']}` ({r['wall_time_s'] / 60:.0f} min)" for r in records
    )
    body = (
        f"Generated from `bench/results/*.json` by `bench/readme_table.py` ({runs}; on a shared "
        "2-core machine; the per-lr `final_loss` and `seconds` rows are in the JSON files).\n\n"
        + records_table(records)
        + "\n\nClaims:\n\n"
        + claims_table(records)
        + "\n\n![task A](bench/results/forward_passes_A.png)\n"
        + "![task A curves](bench/results/forward_passes_A_curves.png)\n"
        + "![task B](bench/results/forward_passes_B.png)\n"
    )
    write_readme_block(HERE.parent / "README.md", body)


if __name__ == "__main__":
    main()
