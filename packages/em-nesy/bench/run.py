"""EM-NeSy reproduction: multi-digit addition from scikit-learn digits (offline).

Writes three records to --out:
  addition_accuracy  N in {1, 2, 4}: every engine + exact gradient + supervised, all seeds
  addition_n15       N = 15: EM-exact and exact gradient on 5 seeds, other engines on seed 0,
                     with the learned digit permutation of every seed
  scaling            E-step time per example vs N (1..50), epoch time, autograd / RSS memory

    python bench/run.py [--quick] [--seeds 0 1 2] [--threads 1] [--workers 3] [--only ...]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from claims import accuracy_claims, n15_claims, scaling_claims
from plots import plot_accuracy_by_n, plot_estep_scaling
from protocol import (
    ENGINES,
    Setting,
    epoch_times,
    grad_check,
    linear_r2,
    result_rows,
    training_runs,
)

from methodkit.bench import Outcome, ResultRow, peak_memory, run_suite

PACKAGE = "em-nesy"
PER_SEED_KEYS = ("method", "n_digits", "seed", "sum_accuracy", "digit_accuracy", "acceptance_rate")
N15_KEYS = (
    "method",
    "seed",
    "sum_accuracy",
    "digit_accuracy",
    "permutation",
    "invalid_frac",
    "acceptance_rate",
)


def addition_accuracy(args: argparse.Namespace) -> Outcome:
    """N <= 4: EM with every engine against the exact gradient and a supervised classifier."""
    s = Setting.from_args(args)
    runs, t_train = training_runs(s)
    small = [r for r in runs if r["n_digits"] in s.ns]
    grad_diff = grad_check([1, 2] if s.quick else [1, 2, 4, 15])
    claims = accuracy_claims(s, runs, grad_diff)
    config = {
        "n_train_per_epoch": s.n_train,
        "n_test": s.n_test,
        "batch_size": 32,
        "lr": 1e-3,
        "model": "DigitMLP 64-128-10",
        "epochs": {n: s.epochs(n) for n in s.ns},
        "n_samples": 1024,
        "abc_tau": 0.5,
        "abc_distance": "digit-wise Hamming",
        "split": "stratified, seed 0",
        "workers": s.workers,
        "engine_seeds": list(s.seeds[: s.engine_seeds]),
        "train_wall_s": round(t_train, 1),
        "per_seed": [{k: r[k] for k in PER_SEED_KEYS} for r in small],
    }
    methods = [*ENGINES, "em_enumeration", "supervised"]
    return Outcome(
        config,
        result_rows(small, methods, s.ns),
        claims,
        plot_metrics=["sum_accuracy", "digit_accuracy"],
        extra_plots={"by_n": plot_accuracy_by_n},
    )


def addition_n15(args: argparse.Namespace) -> Outcome:
    """N = 15: EM-exact and the exact gradient per seed, the other engines on one seed."""
    s = Setting.from_args(args)
    runs, _ = training_runs(s)
    big_n = s.big_n
    big = [r for r in runs if r["n_digits"] == big_n]
    claims = n15_claims(s, big)
    config = {
        "n_digits": big_n,
        "epochs": {r["method"]: r["epochs"] for r in big},
        "n_train_per_epoch": s.n_train,
        "em_exact_seeds": s.big_seeds,
        "other_engines_seed": s.big_seeds[0],
        "per_seed": [{k: r[k] for k in N15_KEYS} for r in big],
    }
    rows = result_rows(big, ENGINES, [big_n])
    return Outcome(
        config, rows, claims, seeds=s.big_seeds, plot_metrics=["sum_accuracy", "digit_accuracy"]
    )


def _memory(s: Setting, mem_ns: list[int]) -> tuple[dict, dict]:
    """Autograd saved-tensor MiB per (method, N), and peak RSS via peak_memory (full run)."""
    from tasks import memory_run, saved_tensor_bytes

    methods = ("em_dp", "exact_gradient")
    saved = {m: {str(n): saved_tensor_bytes(m, n) / 2**20 for n in mem_ns} for m in methods}
    rss = {}
    if not s.quick:  # a spawned process per (method, N): too slow for the smoke run
        rss = {
            m: {str(n): peak_memory(memory_run, "cpu", args=(m, n)) / 2**20 for n in mem_ns}
            for m in methods
        }
    return saved, rss


def scaling(args: argparse.Namespace) -> Outcome:
    """E-step time per example against N, epoch time and memory, EM against exact gradient."""
    from tasks import estep_time

    s = Setting.from_args(args)
    runs, _ = training_runs(s)
    big_n = s.big_n
    big = [r for r in runs if r["n_digits"] == big_n]
    grid = [1, 2, 4, 8] if s.quick else [1, 2, 4, 8, 15, 25, 50]
    reps = 3 if s.quick else 15
    times: dict[str, dict[str, float]] = {m: {} for m in ("em_dp", "em_bp", "exact_gradient")}
    for n in grid:
        for m in times:
            times[m][str(n)] = estep_time(m, n, repeats=reps) * 1e6
    r2 = {m: linear_r2(grid, [times[m][str(n)] for n in grid]) for m in ("em_dp", "em_bp")}
    mem_ns = [big_n] if s.quick else [big_n, 50]
    saved, rss = _memory(s, mem_ns)
    rows = [
        ResultRow.from_values(f"{m}@N={n}", "us_per_example", [times[m][str(n)]], False)
        for m in times
        for n in grid
    ]
    for m in saved:
        for n in mem_ns:
            rows.append(
                ResultRow.from_values(f"{m}@N={n}", "autograd_saved_MiB", [saved[m][str(n)]], False)
            )
            if rss:
                rows.append(
                    ResultRow.from_values(
                        f"{m}@N={n}", "peak_rss_increase_MiB", [rss[m][str(n)]], False
                    )
                )
    ep_em = [r["epoch_time"] for r in big if r["method"] == "em_dp"]
    ep_ex = [r["epoch_time"] for r in big if r["method"] == "exact_gradient"]
    for name, vals in (("em_dp", ep_em), ("exact_gradient", ep_ex)):
        rows.append(ResultRow.from_values(f"{name}@N={big_n}", "epoch_time_s", vals, False))
    # the training runs shared the CPU with the other workers; time one epoch of each method
    # again here, alternating, with nothing else of ours running
    ctl = epoch_times(big_n, 1 if s.quick else 3, s.n_train)
    for name, vals in ctl.items():
        rows.append(ResultRow.from_values(f"{name}@N={big_n}", "epoch_time_alone_s", vals, False))
    claims = scaling_claims(r2, ctl, ep_em, ep_ex, saved, rss, big_n, mem_ns)
    config = {
        "batch_size": 32,
        "estep_repeats": reps,
        "grid": grid,
        "estep_us_per_example": times,
        "linear_fit_r2": r2,
        "autograd_saved_MiB": saved,
        "peak_rss_increase_MiB": rss,
        "memory_steps": 20,
        "epoch_time_source": f"addition_n15 runs (N={big_n}) and an interleaved re-timing",
    }
    metrics = ["autograd_saved_MiB", "peak_rss_increase_MiB", "epoch_time_s", "epoch_time_alone_s"]
    return Outcome(
        config,
        rows,
        claims,
        seeds=[0],
        plot_metrics=[m for m in metrics if rss or m != "peak_rss_increase_MiB"],
        units={m: "MiB" for m in metrics[:2]} | {m: "s" for m in metrics[2:]},
        extra_plots={"estep": plot_estep_scaling},
    )


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workers", type=int, default=1, help="parallel training processes")
    parser.add_argument(
        "--engine-seeds",
        type=int,
        default=None,
        help="seeds for the engines other than EM-exact / exact gradient at N <= 4 (default: all)",
    )


def main(argv: list[str] | None = None) -> int:
    """Run the selected benchmarks (default: all three) and return the exit code."""
    benchmarks = {"addition_accuracy": addition_accuracy, "addition_n15": addition_n15}
    return run_suite(PACKAGE, {**benchmarks, "scaling": scaling}, argv, add_arguments=_options)


if __name__ == "__main__":
    os.environ.setdefault("TQDM_DISABLE", "1")
    sys.exit(main())
