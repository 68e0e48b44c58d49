"""Forward passes to a target loss (spec tasks A and B, SmolLM2), ablation, memory, step time.

python bench/run.py [--quick] [--seeds 0 1 2] [--threads 1] [--spec] [--workers 2]
                    [--only forward_passes_A forward_passes_B engine_ablation peak_memory
                            step_time step_time_rows noise_floor smollm2_zo]
"""

from __future__ import annotations

import argparse
import sys

import memory
import noise_floor
import protocol as fwd
import smollm2_zo
import step_time
from tasks import digits_task, sequence_task

from methodkit.bench import Outcome, ResultRow, run_suite

PACKAGE = "engine-zo"
FWD_UNITS = {"fwd_at_best_lr": "forward passes"}

FULL_A = {"lrs": [0.005, 0.01, 0.015, 0.02], "budget": 8000, "eval_every": 100, "target": 2.0}
FULL_B = {
    "lrs": [1e-3, 3e-3, 1e-2],
    "budget": 2000,
    "eval_every": 20,
    "n": 256,
    "pretrain_steps": 200,
    "adamw_steps": 100,
    "methods": fwd.COMPARED,
}
QUICK_A = {"lrs": [0.01], "budget": 200, "eval_every": 100, "target": 2.0}
QUICK_ABLATION_BUDGET = 100  # five V-cycles of every configuration
QUICK_B = {
    "lrs": [1e-2],
    "budget": 100,
    "eval_every": 20,
    "n": 64,
    "pretrain_steps": 5,
    "adamw_steps": 5,
    "methods": ["MeZO", "ENGINE"],
}
# peak memory: (width, depth, reps); the full size is the claim's ~20M-parameter MLP
MEMORY = {"full": (1024, 19, 2), "quick": (128, 2, 1)}
# step time: timed V-cycles (after one untimed) per model; the wide MLP is the memory one
STEP_TIME = {"full": {"digits": 20, "wide": 2}, "quick": {"digits": 1, "wide": 1}}
# rows-per-step sweep on the wide MLP: (batches, timed V-cycles per batch)
ROWS_SWEEP = {"full": ((32, 256, 2048, 8192), 3), "quick": ((4, 16), 1)}
NOISE_FLOOR = {"full": ((32, 256), 3), "quick": ((4,), 1)}


def config_a(args: argparse.Namespace) -> dict:
    cfg = {**(QUICK_A if args.quick else FULL_A), "methods": fwd.COMPARED}
    if args.spec and not args.quick:
        cfg.update(target=0.8, budget=20_000)
    return cfg


def config_b(args: argparse.Namespace) -> dict:
    cfg = dict(QUICK_B if args.quick else FULL_B)
    if args.spec and not args.quick:
        cfg.update(n=1024, budget=20_000)
    return cfg


def forward_passes_a(args: argparse.Namespace) -> Outcome:
    cfg = config_a(args)
    task = digits_task(target=cfg["target"])
    fwd.log(f"task A: {task.info}, target {task.target}")
    budget = cfg["budget"]
    res = fwd.run_task(
        task, cfg["lrs"], cfg["methods"], args.seeds, budget, cfg["eval_every"], args.workers
    )
    adamw = fwd.adamw_steps_to_target(task)
    fwd.print_table(task, res, budget)
    rows = fwd.rows_for(res, budget) + fwd.ratio_rows(res)
    rows += [
        ResultRow.from_values(
            f"AdamW (first-order) lr={lr:g}", "steps_to_target (fwd+bwd each)", [steps], False
        )
        for lr, steps in adamw
        if steps is not None
    ]
    engine = fwd.best_lr(res["ENGINE"])[1]
    claims = [
        fwd.claim_le(
            "(2A) task A: ENGINE at its best lr <= 1.05 x the best tuned baseline "
            "(MeZO, LOZO, SubZero)",
            engine,
            fwd.best_baseline(res),
            1.05,
            budget,
            extra=f"; ratios: {fwd.ratio_text(res)}",
        )
    ]
    claims += [
        fwd.claim_le(
            f"(1) task A lr={lr:g}: ENGINE median fwd <= 0.75 x MeZO's",
            fwd.median_fwd(res["ENGINE"][lr]),
            fwd.median_fwd(res["MeZO"][lr]),
            0.75,
            budget,
        )
        for lr in (0.005, 0.01)
        if lr in res["ENGINE"]
    ]
    claims.append(
        fwd.claim_le(
            "(3) task A: ENGINE(inject=0.5) at its best lr <= 0.9 x ENGINE(inject=0)",
            engine,
            fwd.best_lr(res["ENGINE(inject=0)"])[1],
            0.9,
            budget,
        )
    )
    config = {
        **cfg,
        "eps": fwd.EPS,
        "target": task.target,
        "task": task.info,
        "adamw_steps_to_target": {str(k): v for k, v in adamw},
        "note": "fwd counts ZO optimizer closure calls; evaluation passes not counted",
    }
    curves = fwd.curves_plot(res, "task A: seed-0 loss at best lr")
    return Outcome(
        config,
        rows,
        claims,
        plot_metrics=["fwd_at_best_lr"],
        units=FWD_UNITS,
        extra_plots={"curves": curves},
    )


def forward_passes_b(args: argparse.Namespace) -> Outcome:
    cfg = config_b(args)
    task = sequence_task(
        n=cfg["n"], pretrain_steps=cfg["pretrain_steps"], adamw_steps=cfg["adamw_steps"]
    )
    fwd.log(f"task B: {task.info}, target {task.target:.4f}")
    budget = cfg["budget"]
    res = fwd.run_task(
        task, cfg["lrs"], cfg["methods"], args.seeds, budget, cfg["eval_every"], args.workers
    )
    fwd.print_table(task, res, budget)
    claim = fwd.claim_le(
        "(2B) task B: ENGINE at its best lr <= 1.05 x the best tuned baseline "
        "(MeZO, LOZO, SubZero)",
        fwd.best_lr(res["ENGINE"])[1],
        fwd.best_baseline(res),
        1.05,
        budget,
        extra=f"; ratios: {fwd.ratio_text(res)}",
    )
    config = {**cfg, "eps": fwd.EPS, "target": task.target, "task": task.info}
    rows = fwd.rows_for(res, budget) + fwd.ratio_rows(res)
    return Outcome(config, rows, [claim], plot_metrics=["fwd_at_best_lr"], units=FWD_UNITS)


def engine_ablation(args: argparse.Namespace) -> Outcome:
    cfg_a = config_a(args)
    task = digits_task(target=cfg_a["target"])
    lrs, budget = [0.01], QUICK_ABLATION_BUDGET if args.quick else cfg_a["budget"]
    names = [f"ENGINE {label}" for label in fwd.ABLATION]
    res = fwd.run_task(task, lrs, names, args.seeds, budget, 100, args.workers)
    fwd.print_table(task, res, budget)
    ranked = sorted((fwd.best_lr(v)[1] or float("inf"), k) for k, v in res.items())
    claim = fwd.claim_le(
        "ablation (task A, lr 0.01): the spec-default V-cycle is within 1.2x of the "
        "best configuration tried",
        fwd.best_lr(res[names[0]])[1],
        None if ranked[0][0] == float("inf") else ranked[0][0],
        1.2,
        budget,
        extra=f"; best: {ranked[0][1]}",
    )
    config = {
        "lrs": lrs,
        "budget": budget,
        "configs": {
            k: {a: list(b) if isinstance(b, tuple) else b for a, b in v.items()}
            for k, v in fwd.ABLATION.items()
        },
        "eps": fwd.EPS,
    }
    rows = fwd.rows_for(res, budget)
    return Outcome(config, rows, [claim], plot_metrics=["fwd_at_best_lr"], units=FWD_UNITS)


def peak_memory(args: argparse.Namespace) -> Outcome:
    width, depth, reps = MEMORY["quick" if args.quick else "full"]
    rows, claim, config = memory.measure(width, depth, reps, args.threads, args.quick)
    return Outcome(config, rows, [claim], seeds=[0], units={"peak_MiB_above_torch_import": "MiB"})


def step_time_benchmark(args: argparse.Namespace) -> Outcome:
    cycles = STEP_TIME["quick" if args.quick else "full"]
    width, depth, _ = MEMORY["quick" if args.quick else "full"]
    models = {
        "digits MLP": (step_time.digits_model, cycles["digits"], args.quick),
        f"{depth}x{width} MLP": (
            lambda: step_time.wide_model(width, depth),
            cycles["wide"],
            args.quick,
        ),
    }
    rows, claims, config = step_time.measure(models)
    cost = config.pop("cost")
    config = {"models": config, "limit": step_time.LIMIT, "eps": step_time.EPS, "lr": step_time.LR,
              "cost": cost}  # fmt: skip
    config["note"] = "medians of per-step ratios to the MeZO step taken in the same round"
    return Outcome(
        config,
        rows,
        claims,
        seeds=[0],
        plot_metrics=["time_ratio_to_MeZO"],
        units={
            "ms_per_step": "ms",
            "time_ratio_to_MeZO": "x MeZO step",
            "full_draws_per_step": "full-size noise draws",
            "ms_per_full_draw": "ms",
        },
    )


def step_time_rows_benchmark(args: argparse.Namespace) -> Outcome:
    """The default ENGINE step beside MeZO's as the forward pass grows (rows per step)."""
    width, depth, _ = MEMORY["quick" if args.quick else "full"]
    batches, cycles = ROWS_SWEEP["quick" if args.quick else "full"]
    rows, claims, config = step_time.rows_sweep(width, depth, batches, cycles, args.quick)
    config = {"rows": list(batches), "timed_cycles": cycles, "limit": step_time.LIMIT, **config}
    return Outcome(
        config,
        rows,
        claims,
        seeds=[0],
        plot_metrics=["vcycle_ratio_to_MeZO", "forward_in_full_draws"],
        units={"vcycle_ratio_to_MeZO": "x MeZO step", "forward_in_full_draws": "full-size draws"},
    )


def noise_floor_benchmark(args: argparse.Namespace) -> Outcome:
    """The V-cycle step ratio with torch's generator and with noise at copy speed."""
    width, depth, _ = MEMORY["quick" if args.quick else "full"]
    batches, cycles = NOISE_FLOOR["quick" if args.quick else "full"]
    rows, claims, config = noise_floor.floor_sweep(width, depth, batches, cycles, args.quick)
    config = {"rows": list(batches), "timed_cycles": cycles, "limit": step_time.LIMIT, **config}
    units = {"vcycle_ratio_to_MeZO": "x MeZO step", "ms_per_step": "ms"}
    return Outcome(
        config, rows, claims, seeds=[0], plot_metrics=["vcycle_ratio_to_MeZO"], units=units
    )


def smollm2_benchmark(args: argparse.Namespace) -> Outcome:
    """ENGINE vs MeZO, LOZO, SubZero on SmolLM2-135M-Instruct (tiny_smollm2 with --quick)."""
    return smollm2_zo.outcome(args.quick, list(args.seeds))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spec",
        action="store_true",
        help="spec protocol: task A target 0.8, budget 20,000; task B 1,024 sequences",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="independent single-threaded runs in parallel (spec: 2 cores)",
    )


def main(argv: list[str] | None = None) -> int:
    benchmarks = {
        "forward_passes_A": forward_passes_a,
        "forward_passes_B": forward_passes_b,
        "engine_ablation": engine_ablation,
        "peak_memory": peak_memory,
        "step_time": step_time_benchmark,
        "step_time_rows": step_time_rows_benchmark,
        "noise_floor": noise_floor_benchmark,
        "smollm2_zo": smollm2_benchmark,
    }
    return run_suite(PACKAGE, benchmarks, argv, add_arguments=add_arguments)


if __name__ == "__main__":
    sys.exit(main())
