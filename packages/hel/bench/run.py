"""hel benchmark: gradient agreement, training equivalence, baselines, Echo Learning, memory.

    python bench/run.py --threads 1                 # full run, from packages/hel
    python bench/run.py --quick --seeds 0           # smoke run of every benchmark
    python bench/run.py --only memory               # one benchmark

Helpers (configurations, data, training, the memory job) are in ``bench/tasks.py``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import numpy as np
import torch
from bptt_grid import bptt_grid
from classifier import classifier
from default_remedy import default_memory
from long_runs import memory, step_time
from tasks import (
    PROBE_ESTIMATORS,
    THRESHOLDS,
    build_model,
    config,
    gap_claim,
    load_task,
    train,
    train_seeded,
    trivial_score,
)

import methodkit
from hel import HamiltonianEcho, compare_estimators
from methodkit.bench import Outcome, ResultRow, check, compare, run_suite

PACKAGE = "hel"


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _train_all(name: str, args: argparse.Namespace, methods: list[str]) -> dict:
    results = {}
    for seed in args.seeds:
        for method in methods:
            r = results[(method, seed)] = train_seeded(name, method, seed, args.quick)
            _log(f"  {name} seed={seed} {method}: {r['metric']:.4f} ({r['wall']:.1f}s)")
    return results


def _task_claims(name: str, metric: str, results: dict, args: argparse.Namespace) -> list:
    seeds, quick = list(args.seeds), args.quick
    hel = [results[("hel", s)]["metric"] for s in seeds]
    bptt = [results[("bptt", s)]["metric"] for s in seeds]
    clf = metric == "test_accuracy"
    claims = []
    if name in ("sequential_digits", "gunpoint", "delayed_recall"):
        text = f"|{metric}(HEL) - {metric}(BPTT)| <= 0.02 per seed"
        trivial = trivial_score(load_task(name, quick))
        claims.append(gap_claim(text, hel, bptt, trivial, clf, 0.02))
    thr, mh = THRESHOLDS[name], float(np.mean(hel))
    if clf:
        claims.append(
            check(f"HEL mean test accuracy >= {thr}", mh >= thr, f"{mh:.4f}", inputs=[mh])
        )
    else:
        claims.append(check(f"HEL mean test NMSE <= {thr}", mh <= thr, f"{mh:.4f}", inputs=[mh]))
    if name in ("sequential_digits", "delayed_recall") and not quick:
        for base in ("eprop_sym", "tbptt_k10"):
            mb = float(np.mean([results[(base, s)]["metric"] for s in seeds]))
            claims.append(
                compare(
                    f"HEL mean {metric} {'>=' if clf else '<='} {base}",
                    mh,
                    ">=" if clf else "<=",
                    mb,
                    measured=f"HEL {mh:.4f} vs {base} {mb:.4f}",
                )
            )
    return claims


def task_benchmark(name: str) -> Callable[[argparse.Namespace], Outcome]:
    """Train every method of task ``name`` for every seed; accuracy (or NMSE) and time."""

    def run(args: argparse.Namespace) -> Outcome:
        cfg = config(name, args.quick)
        results = _train_all(name, args, cfg["methods"])
        metric = "test_accuracy" if load_task(name, args.quick)[4] == "clf" else "test_nmse"
        rows = []
        for method in cfg["methods"]:
            per_seed = [results[(method, s)] for s in args.seeds]
            rows.append(
                ResultRow.from_values(
                    method, metric, [r["metric"] for r in per_seed], metric == "test_accuracy"
                )
            )
            rows.append(
                ResultRow.from_values(method, "train_wall_s", [r["wall"] for r in per_seed], False)
            )
        claims = _task_claims(name, metric, results, args)
        return Outcome(config=cfg, results=rows, claims=claims, plot_metrics=[metric])

    return run


def grad_agreement(args: argparse.Namespace) -> Outcome:
    """Gradient agreement measured every epoch on a fixed batch during HEL training (digits)."""
    runs = [train_seeded("sequential_digits", "hel", s, args.quick)["cosines"] for s in args.seeds]
    rows, mins = [], {}
    for k in PROBE_ESTIMATORS:
        vals = [min(ep[k] for ep in run) for run in runs]
        means = [float(np.mean([ep[k] for ep in run])) for run in runs]
        mins[k] = min(vals)
        rows.append(ResultRow.from_values(k, "cosine_to_bptt", means, True))
        rows.append(ResultRow.from_values(k, "min_cosine_to_bptt", vals, True))
    errs = []  # float64 linearized echo on the digits model
    data = load_task("sequential_digits", args.quick)
    for seed in args.seeds:
        model = build_model(seed, 1, 10, 64, 0.2, "mean").double()
        loss = torch.nn.CrossEntropyLoss()
        x, y = data[0][:64].double(), data[1][:64]
        est = {"lin": HamiltonianEcho(model, loss, mode="linearized")}
        errs.append(compare_estimators(model, (x, y), loss, est)["lin"]["rel_error"])
    rows.append(ResultRow.from_values("hel_linearized_f64", "rel_error_to_bptt", errs, False))
    claims = [
        check(
            "cosine(HEL centered, BPTT) >= 0.9999 on every recorded batch (float32)",
            mins["hel"] >= 0.9999,
            f"min {mins['hel']:.6f}",
            inputs=[mins["hel"]],
        ),
        check(
            "cosine(HEL two_pass, BPTT) >= 0.999 on every recorded batch (float32)",
            mins["hel_two_pass"] >= 0.999,
            f"min {mins['hel_two_pass']:.6f}",
            inputs=[mins["hel_two_pass"]],
        ),
        check(
            "linearized HEL (float64) relative error to BPTT <= 1e-9",
            max(errs) <= 1e-9,
            f"max {max(errs):.2e}",
            inputs=errs,
        ),
        check(
            "cosine of e-prop and TBPTT(k=10) to BPTT reported (expected < 0.9)",
            mins["eprop_sym"] < 0.9 and mins["tbptt_k10"] < 0.9,
            f"e-prop min {mins['eprop_sym']:.3f}, tbptt min {mins['tbptt_k10']:.3f}",
            inputs=[mins["eprop_sym"], mins["tbptt_k10"]],
        ),
    ]
    cfg = {
        "task": "sequential_digits",
        "probe_batch": 64,
        "when": "end of every HEL training epoch",
    }
    return Outcome(config=cfg, results=rows, claims=claims, plot_metrics=["cosine_to_bptt"])


def echo_learning(args: argparse.Namespace) -> Outcome:
    """RateEchoCell (non-symmetric W): EL with/without homeostasis vs BPTT of the same cell."""
    cfg = config("echo_learning", args.quick)
    Xtr, ytr, Xte, yte, task = load_task("sequential_digits", args.quick)
    data = (Xtr[: cfg["n_train"]], ytr[: cfg["n_train"]], Xte, yte, task)
    acc, cos = {}, {}
    for seed in args.seeds:
        for method in cfg["methods"]:
            methodkit.seed_everything(seed)
            probe = (Xtr[:64], ytr[:64], ["el"]) if method.startswith("el") else None
            r = train(method, data, cfg, seed, probe, cell="rate")
            acc[(method, seed)] = r["metric"]
            if probe is not None:
                cos[(method, seed)] = r["cosines"][-1]["el"]
            _log(f"  echo_learning seed={seed} {method}: {r['metric']:.4f} ({r['wall']:.1f}s)")
    seeds = list(args.seeds)
    rows = []
    for method in cfg["methods"]:
        rows.append(
            ResultRow.from_values(method, "test_accuracy", [acc[(method, s)] for s in seeds], True)
        )
        if method.startswith("el"):
            rows.append(
                ResultRow.from_values(
                    method, "cosine_to_bptt", [cos[(method, s)] for s in seeds], True
                )
            )
    # tuned homeostasis weight: best mean cosine on the grid
    grid = [m for m in cfg["methods"] if "=" in m]
    best = max(grid, key=lambda m: np.mean([cos[(m, s)] for s in seeds]))
    bc = float(np.mean([cos[(best, s)] for s in seeds]))
    c0 = float(np.mean([cos[("el", s)] for s in seeds]))
    claims = [
        check(
            f"EL with tuned homeostasis ({best}): cosine to BPTT >= 0.95 after the last epoch",
            bc >= 0.95,
            f"{bc:.4f} (without homeostasis {c0:.4f})",
            inputs=[bc],
        ),
        gap_claim(
            f"EL ({best}) accuracy within 0.05 of BPTT on the same cell, per seed",
            [acc[(best, s)] for s in seeds],
            [acc[("bptt", s)] for s in seeds],
            trivial_score(data),
            True,
            0.05,
        ),
    ]
    return Outcome(
        config=cfg, results=rows, claims=claims, plot_metrics=["test_accuracy", "cosine_to_bptt"]
    )


BENCHMARKS = {
    "sequential_digits": task_benchmark("sequential_digits"),
    "grad_agreement": grad_agreement,
    "gunpoint": task_benchmark("gunpoint"),
    "basic_motions": task_benchmark("basic_motions"),
    "delayed_recall": task_benchmark("delayed_recall"),
    "echo_learning": echo_learning,
    "bptt_grid": bptt_grid,
    "memory": memory,
    "step_time": step_time,
    "classifier": classifier,
    "default_memory": default_memory,
}


def main(argv: list[str] | None = None) -> int:
    return run_suite(PACKAGE, BENCHMARKS, argv)


if __name__ == "__main__":
    sys.exit(main())
