"""eo-wm benchmark: Extreme Summer, Seasonal Matched-Pair, counterfactual pairs, pixel metrics.

Every model (EO-WM, undifferentiated diffusion, ConvLSTM, persistence, NDVI climatology) is
trained and scored on the same simulated world per seed (offline land-surface simulator with
hidden soil moisture). Cost is recorded on the paper's axis: training seconds, sampling seconds
and network calls per window.

    python bench/run.py [--quick] [--seeds 0 1 2] [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
import time

import cost as cost_bench
import seed_cache
import spec_claims
import tasks
from records import LABELS, UNITS, before_fix_rows

import methodkit
from methodkit.bench import Outcome, ResultRow, run_suite

PACKAGE = "eo-wm"
# Spec protocol: 4000 steps, AdamW 2e-4, hidden 96 / depth 4 / patch 4, 30 Euler steps.
# Scaled to fit ~50 min of one CPU core (stated in the README): 800 steps (1/5), lr 1e-3
# for every model to compensate, hidden 64 / depth 3 / patch 8, 10 Euler steps (1/3).
FULL = {
    "train_locations": 300,
    "test_locations": 60,
    "years": 6,
    "grid": 16,
    "train_windows": 2000,
    "n_extreme": 48,
    "n_pairs": 32,
    "n_cf": 32,
    "patch": 8,
    "hidden": 64,
    "depth": 3,
    "heads": 4,
    "steps": 800,
    "batch": 16,
    "lr": 1e-3,
    "members": 8,
    "euler_steps": 10,
    "lstm_hidden": 32,
    "n_dose": 24,
    "guidance_grid": [0.0, 1.0, 2.0, 3.0],
    "guidance_criterion": "ndvi_mae",
    "val_locations": 30,
    "n_val": 32,
    "ablations": False,
    "scale": {
        "train_steps": "800 / 4000 = 1/5 (every learned model)",
        "euler_steps": "10 / 30",
        "model": "hidden 64, depth 3, patch 8 (spec: 96, 4, 4)",
        "lr": "1e-3 (spec 2e-4)",
        "flow_target": "residual over the last clean context pixel (package choice)",
        "guidance": "EO-WM samples with anomaly-path guidance (spec: optional); w is chosen "
        "per trained model from guidance_grid by the lowest NDVI MAE of the ensemble mean on "
        "n_val validation windows of val_locations held-out scenes (simulator seed 10 s + 3; "
        "never test windows); eo_wm_no_guidance is the same model at w = 1",
    },
}
QUICK = {
    **FULL,
    "train_locations": 20,
    "test_locations": 10,
    "years": 2,
    "train_windows": 100,
    "n_extreme": 6,
    "n_pairs": 5,
    "n_cf": 4,
    "n_dose": 4,
    "val_locations": 6,
    "n_val": 4,
    "hidden": 16,
    "depth": 1,
    "heads": 2,
    "steps": 10,
    "batch": 8,
    "members": 3,
    "euler_steps": 3,
    "lstm_hidden": 8,
    "ablations": True,
}


def _per_seed(args: argparse.Namespace, part: str) -> tuple[dict, list]:
    cfg = QUICK if args.quick else FULL
    per_seed, t0 = [], time.perf_counter()
    for seed in args.seeds:
        methodkit.seed_everything(seed)
        per_seed.append(tasks.run_seed(cfg, seed)[part])
        print(f"[eo-wm] seed {seed} done at {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return cfg, per_seed


def weather_response(args: argparse.Namespace) -> Outcome:
    """Every model on the simulated world, per seed; claims on the mean over seeds."""
    cfg, per_seed = _per_seed(args, "weather")
    results = [ResultRow.from_values(*r) for r in tasks.rows(per_seed)]
    before, info = before_fix_rows("weather_response", args.quick, list(args.seeds))
    plot = ["es_dae", "sp_dhr", "cf_dhr", "ndvi_mae", "ndvi_crps"]
    return Outcome(
        {**cfg, "before_fix": info},
        results + before,
        spec_claims.weather_claims(per_seed),
        plot_metrics=plot,
        units=UNITS,
        labels=LABELS,
    )


def sensitivity(args: argparse.Namespace) -> Outcome:
    """Swapped and scaled future forcing for every model (same trained models as above)."""
    cfg, per_seed = _per_seed(args, "sensitivity")
    results = [ResultRow.from_values(*r) for r in tasks.rows(per_seed)]
    before, info = before_fix_rows("sensitivity", args.quick, list(args.seeds))
    results += before
    plot = ["swap_ratio", "swap_mae_increase_pct", "dose_ratio", "dose_lower_share"]
    config = {
        **cfg,
        "before_fix": info,
        "dose_scales": list(tasks.DOSE_SCALES),
        "models": "trained once per seed, shared with weather_response in the same process",
    }
    return Outcome(
        config,
        results,
        spec_claims.sensitivity_claims(per_seed),
        plot_metrics=plot,
        units=UNITS,
        labels=LABELS,
    )


SPEC_STEPS = {
    **FULL,
    "steps": 4000,
    "scale": {**FULL["scale"], "train_steps": "4000 / 4000 (the spec's steps)"},
}


def spec_steps(args: argparse.Namespace) -> Outcome:
    """Both suites at the spec's 4000 training steps (~40 min per seed on one core).

    With ``--seed-dir`` each seed's cells are kept on disk (``seed_cache``), so seeds can run
    in separate processes and one last run gathers them into the record.
    """
    cfg = QUICK if args.quick else SPEC_STEPS
    per_seed = []
    for seed in args.seeds:
        run = lambda s=seed: tasks.run_seed(cfg, s)  # noqa: E731
        if args.seed_dir is None:
            per_seed.append(run())
            continue
        cells, reused = seed_cache.load_or_run(args.seed_dir, cfg, seed, run)
        print(f"[eo-wm] seed {seed}: {'read' if reused else 'computed'}", file=sys.stderr)
        per_seed.append(cells)
    weather = [s["weather"] for s in per_seed]
    sens = [s["sensitivity"] for s in per_seed]
    results = [ResultRow.from_values(*r) for r in tasks.rows(weather) + tasks.rows(sens)]
    return Outcome(
        cfg,
        results,
        spec_claims.weather_claims(weather) + spec_claims.sensitivity_claims(sens),
        plot_metrics=["es_dae", "ndvi_mae", "pixel_mae", "swap_ratio", "dose_ratio"],
        units=UNITS,
        labels=LABELS,
    )


def main(argv: list[str] | None = None) -> int:
    return run_suite(
        PACKAGE,
        {
            "weather_response": weather_response,
            "sensitivity": sensitivity,
            "spec_steps": spec_steps,
            "cost": cost_bench.cost_suite,
        },
        argv,
        description=__doc__.splitlines()[0],
        add_arguments=_add_arguments,
    )


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seed-dir",
        default=None,
        help="spec_steps: keep each seed's cells in DIR/seed_<n>.json and reuse them when the "
        "configuration matches (run seeds in separate processes, then gather them)",
    )


if __name__ == "__main__":
    sys.exit(main())
