"""ESS-Flow benchmark: 2-D toy (A), lattice (B), chains (C), linear16, SW2 parts, materials.

Tiny flows are trained from scratch in the run (offline, generated data). Every method gets
the same budget of single-sample generator evaluations as ESS-Flow where that is meaningful
(SIR, pCN); DPS costs one guided ODE solve with backward passes per sample.

    python bench/run.py [--quick] [--seeds 0 1 2] [--threads 1] [--only toy2d linear16 ...]

``linear16``: error versus iterations on a 16-d closed-form problem (ESS-Flow, pCN, SIR at
equal evaluations); ``sw2_toy``: the toy A1 SW2 split into its sources; ``materials``: ASE's
EMT calculator as the observation of a small flow over generated Cu/Au cells.

Records and plots go to the package's ``bench/results`` (``--out`` to change it).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import linear16
import materials
import sw2_toy
import tasks

import methodkit
from methodkit.bench import Outcome, ResultRow, run_suite

PACKAGE = "ess-flow"

FULL = {
    "toy2d": {
        "train_steps": 3000,
        "batch": 512,
        "hidden": 128,
        "layers": 3,
        "n_data": 50000,
        "ode_steps": 20,
        "n_ref": 200000,
        "n_ref_samples": 20000,
        "chains": 64,
        "iters": 400,
        "burn_in": 100,
        "dps_samples": 4096,
        "dps_scales": [0.1, 0.3, 1.0, 3.0, 10.0],
        "pcn_betas": [0.05, 0.1, 0.2, 0.4, 0.8],
        "pilot_iters": 30,
    },
    "lattice": {
        "train_steps": 4000,
        "batch": 256,
        "hidden": 256,
        "layers": 3,
        "n_data": 20000,
        "size": 6,
        "T": 2.5,
        "sweeps": 200,
        "ode_steps": 10,
        "chains": 64,
        "iters": 200,
        "burn_in": 50,
        "pcn_betas": [0.05, 0.1, 0.2, 0.4, 0.8],
        "pilot_iters": 20,
        "n_prior": 4000,
        # target rule, fixed before the run: q* = 80 % quantile of q among the trained flow's
        # prior samples with |f - 0.25| <= 0.03 (seed 10000 + seed, disjoint from evaluation)
        "target_quantile": 0.8,
        "target_prior_n": 4000,
        "target_seed_offset": 10000,
        "target_min_count": 50,
    },
    "chains": {
        "train_steps": 5000,
        "batch": 256,
        "hidden": 256,
        "layers": 4,
        "n_data": 20000,
        "n_res": 16,
        "ode_steps": 10,
        "n_targets": 20,
        "chains_per_target": 8,
        "iters": 150,
        "burn_in": 75,
        "n_pairs": 8,
        "dist_sigma": 0.5,
        "n_contacts": 16,
        "contact_threshold": 8.0,
        "flip_prob": 0.05,
        "dps_scales": [0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0],
        "dps_per_target": 64,
        "n_prior": 1000,
    },
    "linear16": {"chains": 64, "iters": [250, 500, 1000, 2000]},
    "sw2_toy": {
        "train_steps": 3000,
        "batch": 512,
        "hidden": 128,
        "layers": 3,
        "n_data": 50000,
        "ode_steps": 20,
        "n_ref": 200000,
        "n_ref_samples": 20000,
        "chains": 64,
        "iters": 400,
        "burn_in": 100,
    },
    "materials": {
        "train_steps": 1500,
        "batch": 256,
        "hidden": 128,
        "layers": 3,
        "n_data": 4000,
        "ode_steps": 10,
        "n_prior": 400,
        "energy_quantile": 0.05,  # target rule, fixed before any run
        "volume_quantile": 0.95,
        "energy_sigma": 0.01,
        "energy_tol": 0.02,
        "volume_sigma": 0.05,
        "volume_tol": 0.1,
        "chains": 16,
        "iters": 60,
        "burn_in": 20,
        "dps_samples": 256,
        "dps_scales": [0.01, 0.1, 1.0],
    },
}
QUICK = {
    "toy2d": {
        **FULL["toy2d"],
        "train_steps": 100,
        "batch": 128,
        "n_data": 5000,
        "n_ref": 5000,
        "n_ref_samples": 2000,
        "chains": 16,
        "iters": 30,
        "burn_in": 10,
        "dps_samples": 512,
        "dps_scales": [0.3],
        "pcn_betas": [0.2],
        "pilot_iters": 3,
        "ode_steps": 10,
    },
    "lattice": {
        **FULL["lattice"],
        "train_steps": 100,
        "batch": 128,
        "hidden": 64,
        "layers": 2,
        "n_data": 2000,
        "sweeps": 50,
        "chains": 8,
        "iters": 15,
        "burn_in": 5,
        "ode_steps": 5,
        "pcn_betas": [0.2],
        "pilot_iters": 3,
        "n_prior": 500,
        "target_prior_n": 500,
        "target_min_count": 10,
    },
    "chains": {
        **FULL["chains"],
        "train_steps": 100,
        "batch": 128,
        "hidden": 64,
        "layers": 2,
        "n_data": 1000,
        "n_targets": 3,
        "chains_per_target": 4,
        "iters": 15,
        "burn_in": 5,
        "dps_scales": [0.01],
        "dps_per_target": 8,
        "n_prior": 200,
        "ode_steps": 5,
    },
    "linear16": {"chains": 8, "iters": [20, 40]},
    "sw2_toy": {
        **FULL["sw2_toy"],
        "train_steps": 20,
        "batch": 64,
        "n_data": 500,
        "ode_steps": 3,
        "n_ref": 2000,
        "n_ref_samples": 500,
        "chains": 4,
        "iters": 12,
        "burn_in": 4,
    },
    "materials": {
        **FULL["materials"],
        "train_steps": 20,
        "batch": 64,
        "n_data": 300,
        "ode_steps": 3,
        "n_prior": 40,
        "chains": 4,
        "iters": 6,
        "burn_in": 2,
        "dps_samples": 16,
        "dps_scales": [0.1],
    },
}


TASKS: dict[str, Callable[[dict[str, Any], int], dict[str, Any]]] = {
    "toy2d": tasks.run_toy2d,
    "lattice": tasks.run_lattice,
    "chains": tasks.run_chains,
    "linear16": linear16.run_linear16,
    "sw2_toy": sw2_toy.run_sw2_toy,
    "materials": materials.run_materials,
}


def benchmark(name: str, args: argparse.Namespace) -> Outcome:
    """Run task ``name`` once per seed and summarise it (rows, claims, per-seed extras)."""
    cfg = (QUICK if args.quick else FULL)[name]
    t0 = time.perf_counter()
    per_seed = []
    for seed in args.seeds:
        methodkit.seed_everything(seed)
        per_seed.append(TASKS[name](cfg, seed))
        dt = time.perf_counter() - t0
        print(f"[{name}] seed {seed} done at {dt:.0f} s", file=sys.stderr, flush=True)
    rows, claims, extra = tasks.summarize(name, per_seed)
    return Outcome({**cfg, **extra}, [ResultRow.from_values(*r) for r in rows], claims)


def main(argv: list[str] | None = None) -> int:
    benchmarks = {name: partial(benchmark, name) for name in FULL}
    return run_suite(PACKAGE, benchmarks, argv, description=__doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
