"""EP-Flow benchmark: formula-conditioned disordered CSP on synthetic prototype crystals.

EP-Flow and three learned baselines (OrderedCSPFlow, RowSimplexFlow, LinearDoubleCenteredFlow)
trained with identical budgets on the same split per seed, plus the non-learned
IndependenceCoupling on EP-Flow's geometry. The full run is scaled (see SCALE) to fit the CPU
budget of a shared 2-core machine.

    python bench/run.py [--quick] [--seeds 0 1 2] [--threads 1]

Records and plots go to the package's ``bench/results`` (``--out`` to change it).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import plots
import tasks
from cost import cost
from decoder import decoder
from scale_curve import scale_curve

import methodkit
from methodkit.bench import Outcome, ResultRow, check, compare, run_suite

PACKAGE = "ep-flow"
SCALE = (
    "training compute 1/24 of the spec (FLOPs ~ steps x batch x layers x width^2): width 32 / "
    "2 axial layers / batch 32 / 4000 steps (spec: width 64 / 4 layers / batch 64 / 6000 steps); "
    "AdamW lr 3e-3 with 5 % warm-up + cosine decay (spec: 3e-4 constant) and lam_F = 12 (unit "
    "variance of the torus target), for all learned models; test set 100 (spec 400); EP-Flow's "
    "test Match@1 (1 sample) every 500 steps for the learning curve"
)
FULL = {"n_train": 4000, "n_test": 100, "width": 32, "layers": 2, "heads": 4, "batch": 32,
        "steps": 4000, "lr": 3e-3, "schedule": "cosine", "lam_f": 12.0, "ode_steps": 50,
        "samples": 5, "curve_every": 500, "compute_fraction": 1 / 24, "scale": SCALE}  # fmt: skip
QUICK = {**FULL, "n_train": 300, "n_test": 16, "steps": 30, "ode_steps": 10, "samples": 2,
         "curve_every": 10, "compute_fraction": 30 / 6000 / 16,
         "scale": "smoke run: 30 steps, 16 test formulas, 10 Euler steps"}  # fmt: skip
HIGHER = {"validity": True, "marginal_error": False, "column_error": False, "match@1": True,
          "match@1_strict": True, "match@5": True, "rms@1": False, "rms@5": False,
          "composition_match": True, "site_occ_error": False, "sparsity_recall": True,
          "spinel_both_modes": True, "train_ms_per_step": False, "sample_ms": False,
          "final_loss": False}  # fmt: skip


def claims(m: dict[str, float]) -> list:
    ep = lambda k: m[f"ep_flow/{k}"]  # noqa: E731
    v, cm, me = ep("validity"), ep("composition_match"), ep("marginal_error")
    return [
        check("EP-Flow: validity >= 99.5 %, composition match >= 99 %, mean marginal error <= 1e-5",
              v >= 0.995 and cm >= 0.99 and me <= 1e-5,
              f"validity {v:.4f}, composition {cm:.4f}, marginal error {me:.2e}",
              inputs=[v, cm, me]),
        check("Match@1 (delta 0.1): EP-Flow >= 0.60", ep("match@1") >= 0.60,
              f"{ep('match@1'):.3f}", inputs=[ep("match@1")]),
        compare("Match@1: EP-Flow >= RowSimplexFlow + 0.10", ep("match@1"), ">=",
                m["row_simplex/match@1"], margin=0.10),
        compare("Match@1: EP-Flow >= OrderedCSPFlow + 0.25", ep("match@1"), ">=",
                m["ordered_csp/match@1"], margin=0.25),
        compare("Site-occupancy error (disordered): EP-Flow <= 0.7 x IndependenceCoupling",
                ep("site_occ_error"), "<=", m["independence/site_occ_error"], scale=0.7),
        check("Sparsity recall (disordered): EP-Flow >= 0.9", ep("sparsity_recall") >= 0.9,
              f"{ep('sparsity_recall'):.3f}", inputs=[ep("sparsity_recall")]),
        check("Spinels with two test inversion modes: both among 5 samples for >= 50 %",
              ep("spinel_both_modes") >= 0.5,
              f"{ep('spinel_both_modes'):.3f} of {m['n_two_mode_spinels']:.1f} formulas/seed",
              inputs=[ep("spinel_both_modes")], degenerate=m["n_two_mode_spinels"] == 0),
    ]  # fmt: skip


def synthetic(args: argparse.Namespace) -> Outcome:
    """All methods, every seed; rows are (method, metric) over seeds."""
    cfg = QUICK if args.quick else FULL
    per_seed, t0 = [], time.perf_counter()
    for seed in args.seeds:
        methodkit.seed_everything(seed)
        per_seed.append(tasks.run_seed(cfg, seed))
        print(f"[synthetic] seed {seed} at {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    keys = [k for k in per_seed[0] if "/" in k]
    vals = {k: [s[k] for s in per_seed] for k in keys}
    rows = [ResultRow.from_values(*k.split("/"), v, HIGHER.get(k.split("/")[1]))
            for k, v in vals.items() if np.all(np.isfinite(v))]  # fmt: skip
    mean = {k: float(np.nanmean([s[k] for s in per_seed])) for k in per_seed[0]}
    extra = {k: mean[k] for k in ("data_s", "novel_share", "n_two_mode_spinels", "total_s",
                                  "curve_s")}  # fmt: skip
    curve = [{"steps": int(k.split("@")[1]), "ep_flow match@1 (1 sample, mean of seeds)": mean[k],
              "per seed": " / ".join(f"{s[k]:.2f}" for s in per_seed)}
             for k in per_seed[0] if k.startswith("curve@")]  # fmt: skip
    return Outcome({**cfg, **extra, "curve": curve}, rows, claims(mean),
                   plot_metrics=["match@1", "composition_match", "site_occ_error"],
                   extra_plots={"curve": plots.plot_curve})  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    benchmarks = {
        "synthetic": synthetic,
        "cost": cost,
        "scale_curve": scale_curve,
        "decoder": decoder,
    }
    return run_suite(PACKAGE, benchmarks, argv, description=__doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
