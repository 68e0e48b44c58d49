"""EMO modularity benchmark: standard top-k MoE vs EMO, full model and 25 % / 12.5 % experts.

Both tiny byte-level MoE LMs are trained in the run on the offline four-domain corpus (stdlib
code, its docstrings, generated math drills, generated CSV/JSON) with the same data order, then
evaluated per domain with all experts and restricted to the experts chosen on 8 validation
documents of the domain (router_prob), against random subsets of the same size.

    python bench/run.py [--quick] [--seeds 0 1 2] [--threads 1] [--only modularity cost]

The full run is the spec's protocol scaled to fit ~20 min of one core (see SCALE).
"""

from __future__ import annotations

import argparse
import sys
import time

import tasks
from cost import cost as cost_suite

from methodkit.bench import Outcome, ResultRow, run_suite

PACKAGE = "emo-moe"

# the spec: d 128, 4 layers, 32+1 experts (3+1 active), context 256, batch 16, 2500 steps
SCALE = (
    "steps 2500 -> 1200 (x0.48), context 256 -> 128, tokens per model 10.2M -> 2.5M "
    "(x0.24); model d_model 128 -> 64, 4 -> 2 layers, d_expert 128 -> 64 (expert count, "
    "top-k, shared expert and pool sizes as the spec); corpus 2 MB -> 1 MB per domain"
)
FULL = {
    "model": {
        "d_model": 64,
        "n_layers": 2,
        "n_heads": 4,
        "max_len": 128,
        "num_experts": 32,
        "num_shared": 1,
        "top_k": 3,
        "d_expert": 64,
        "pool_min": 4,
        "pool_max": 32,
        "pool_eval": 8,
        "lb_weight": 0.1,
    },
    "bytes_per_domain": 1_000_000,
    "split": [0.9, 0.05, 0.05],
    "steps": 1200,
    "batch": 16,
    "lr": 2e-3,
    "fractions": [0.25, 0.125],
    "calib_docs": 8,
    "eval_rows": 48,
    "nmi_docs": 40,
    "scale": SCALE,
}
QUICK = {
    **FULL,
    "model": {
        **FULL["model"],
        "d_model": 32,
        "n_layers": 1,
        "n_heads": 2,
        "max_len": 64,
        "d_expert": 16,
    },
    "bytes_per_domain": 40_000,
    "split": [0.6, 0.2, 0.2],
    "steps": 12,
    "batch": 8,
    "eval_rows": 4,
    "nmi_docs": 6,
    "scale": "smoke run: 12 steps of a 1-layer d32 model, thresholds reported, not gated",
}


def modularity(args: argparse.Namespace) -> Outcome:
    """Train both models per seed; loss when restricted to expert subsets, NMI, memory."""
    cfg = QUICK if args.quick else FULL
    t0 = time.perf_counter()
    per_seed = []
    for seed in args.seeds:
        per_seed.append(tasks.run_seed(cfg, seed))
        print(
            f"[modularity] seed {seed} done at {time.perf_counter() - t0:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    rows, claims, extra = tasks.summarize(per_seed, cfg)
    data = tasks.corpus_splits(cfg)
    corpus = {
        "content_hash": data["corpus"].content_hash,
        "sizes": data["corpus"].sizes,
        "build_s": round(data["build_s"], 2),
        "train_rows": per_seed[0]["train_rows"],
    }
    results = [ResultRow.from_values(*r) for r in rows]
    return Outcome(
        {**cfg, "corpus": corpus, **extra},
        results,
        claims,
        plot_metrics=list(PLOT_LABELS),
        units=PLOT_UNITS,
        labels=PLOT_LABELS,
    )


#: the standard plot's axes in words (the record's metric keys are internal names)
PLOT_LABELS = {
    "loss_full": "test loss, all 32 experts",
    "delta_8": "loss increase, 8 of 32 experts\n(selected per domain)",
    "delta_4": "loss increase, 4 of 32 experts\n(selected per domain)",
    "delta_random_8": "loss increase, 8 of 32 experts\n(chosen at random)",
    "nmi": "domain purity of expert use (NMI)",
}
PLOT_UNITS = {k: "nats/byte" for k in ("loss_full", "delta_8", "delta_4", "delta_random_8")}


def cost(args: argparse.Namespace) -> Outcome:
    """The cost suite at the modularity benchmark's model shape (bench/cost.py)."""
    return cost_suite(args, QUICK if args.quick else FULL)


def main(argv: list[str] | None = None) -> int:
    return run_suite(
        PACKAGE, {"modularity": modularity, "cost": cost}, argv,
        description=__doc__.splitlines()[0],
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
