"""Regenerate the README's results block from bench/results/*.json (never typed by hand)."""

from __future__ import annotations

from pathlib import Path

from methodkit.bench import claims_table, load_record, records_table, write_readme_block

ROOT = Path(__file__).resolve().parents[1]
ORDER = ["addition_accuracy", "addition_n15", "scaling"]


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--readme", default=str(ROOT / "README.md"))
    args = parser.parse_args()
    results = Path(args.results)
    recs = [load_record(results / f"{name}.json") for name in ORDER]
    for rec in recs:  # a "|" inside a Markdown table cell must be escaped
        for claim in [rec["claim"], *rec.get("claims", [])]:
            claim["measured"] = claim.get("measured", "").replace("|", "\\|")
    lines = []
    wall = sum(r["wall_time_s"] for r in recs[:1] + recs[2:])
    env = recs[0]["environment"]
    lines.append(
        f"Command: `{recs[0]['command']}` (git {recs[0]['git_commit']}), {env['cpu_count']} CPU "
        f"cores, {env['threads']} thread per process, torch {env.get('torch', '?')}; "
        f"wall time of this invocation {wall / 60:.1f} min (training runs it did not find in "
        "the run cache are included; see Limitations for the cached ones)."
    )
    lines.append("")
    lines.append("Claims:")
    lines.append("")
    lines.append(claims_table(recs))
    lines.append("")
    n15 = recs[1]["config"]["per_seed"]
    lines.append(
        "Per-seed N = 15 runs (digit permutation = most frequent prediction per true digit):"
    )
    lines.append("")
    lines.append("| method | seed | epochs | sum acc | digit acc | learned permutation |")
    lines.append("|---|---|---|---|---|---|")
    epochs = recs[1]["config"]["epochs"]
    for r in sorted(n15, key=lambda r: (r["method"], r["seed"])):
        ep = epochs.get(r["method"], "?") if isinstance(epochs, dict) else epochs
        lines.append(
            f"| {r['method']} | {r['seed']} | {ep} | "
            f"{r['sum_accuracy']:.3f} | {r['digit_accuracy']:.3f} | {r['permutation']} |"
        )
    lines.append("")
    lines.append("All results (mean ± std over seeds):")
    lines.append("")
    lines.append(records_table(recs))
    lines.append("")
    for name in ORDER:
        lines.append(f"![{name}](bench/results/{name}.png)")
    block = "\n".join(lines)
    write_readme_block(Path(args.readme), block, name="results")


if __name__ == "__main__":
    main()
