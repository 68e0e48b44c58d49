"""Reproduction benchmark for esensc: accuracy against exact SHAP, and scaling in n.

Two kinds of records:

* one accuracy record per (dataset, model) configuration: diabetes MLP / XGBoost, wine MLP
  (log-odds), breast-cancer XGBoost (margin). Ground truth is brute-force exact Shapley of the
  interventional game (MLPs, ``esensc.exact_shapley``) or interventional TreeSHAP (XGBoost).
  ESENSC (and its ES / ENSC / plain-midpoint variants) against shap's KernelExplainer and
  PermutationExplainer at multiples of ESENSC's budget of 2n + 2 coalition evaluations per row.
  shapiq's KernelSHAP, permutation and SVARM approximators at ESENSC's budget beside them;
  the reference's own time (brute force or TreeSHAP) as a row.
* ``friedman1_scaling``: XGBoost on make_friedman1 with n in {64, 128, 256, 512} features:
  ESENSC wall time vs n (log-log slope) and accuracy against interventional TreeSHAP.
* ``friedman1_overhead``: esensc's explain against the model's own predict on exactly the
  (2n + 1)·B masked rows, side by side, at n = 64, 256, 1024.
* ``wine_mlp_saturation``: the saturating wine MLP explained as a probability and as log-odds
  (the same coalition table): accuracy, uniformity of the attributions, near-flat rows.

    python bench/run.py [--quick] [--seeds 0 1 2] [--threads 1] [--only diabetes_mlp ...]

Records and plots go to the package's ``bench/results`` (``--out`` to change it).
"""

from __future__ import annotations

import argparse
import math
import statistics
from functools import partial

import numpy as np
from overhead import friedman_xgb, interleaved_seconds, overhead_benchmark
from peers import SHAPIQ_METHODS, shapiq_values
from plots import plot_budget, plot_scaling
from saturation import saturation_benchmark
from tasks import (
    Config,
    logit,
    metrics,
    order3_shapley_share,
    problem,
    raw_table,
    timed,
    tree_truth,
    warm_up_shap,
)

import esensc
from esensc.baselines import esensc_budget, kernel_shap, permutation_shap
from methodkit.bench import Outcome, ResultRow, check, compare, run_suite

PACKAGE = "esensc"
CONFIGS = [
    Config("diabetes_mlp", "diabetes", "mlp"),
    Config("diabetes_xgb", "diabetes", "xgb"),
    Config("wine_mlp", "wine", "mlp"),
    Config("breast_cancer_xgb", "breast_cancer", "xgb"),
]
# configurations where the spec claims KernelSHAP at 2x budget is still worse than ESENSC
KERNEL_2X_CONFIGS = {"diabetes_mlp", "diabetes_xgb", "wine_mlp", "breast_cancer_xgb"}
SCALING_REPS = 5  # interleaved timing reps per (seed, n) in a full run
MIN_TIMED_S = 0.1  # a slope fitted to shorter wall times says nothing about the cost in n
ACCURACY_PLOT = {"plot_metrics": ["deviation", "spearman", "time_s"], "units": {"time_s": "s"}}


def _g(x: float) -> str:
    """``x`` to 4 significant digits; "not run" for a baseline skipped in ``--quick``."""
    return f"{x:.4g}" if math.isfinite(x) else "not run"


def _rows(vals: dict[tuple[str, str], list[float]], hib: dict[str, bool]) -> list[ResultRow]:
    return [ResultRow.from_values(m, k, v, hib[k]) for (m, k), v in vals.items()]


def accuracy(cfg: Config, args: argparse.Namespace) -> Outcome:
    multiples_k = [1, 2] if args.quick else [1, 2, 4, 8]
    # shap's PermutationExplainer JIT-compiles with numba on first use (~10-30 s): full run only
    multiples_p = [] if args.quick else [1, 2]
    vals: dict[tuple[str, str], list[float]] = {}
    n = 0

    def add(method: str, phi: np.ndarray, truth: np.ndarray, fx: np.ndarray, secs: float) -> None:
        dev, rho, top = metrics(phi, truth, fx)
        for metric, v in (("deviation", dev), ("spearman", rho), ("top5_overlap", top),
                          ("time_s", secs)):  # fmt: skip
            vals.setdefault((method, metric), []).append(v)

    if not args.quick:
        warm_up_shap()
    for seed in args.seeds:
        p = problem(cfg, seed, args.quick)
        f, link, bg, X = p.f, p.link, p.bg, p.X
        n = X.shape[1]
        if cfg.model == "mlp":
            table, secs = raw_table(cfg, seed, args.quick)
            game = table if link == "identity" else logit(table)
            truth = esensc.shapley_from_values(game)
            vals.setdefault(("exact (brute force)", "time_s"), []).append(secs)
            vals.setdefault(("game", "order3_shapley_share"), []).append(order3_shapley_share(game))
        else:
            truth, secs = timed(tree_truth, p.model, bg, X)
            vals.setdefault(("treeshap (exact)", "time_s"), []).append(secs)
        fx = f(X) if link == "identity" else logit(f(X))
        budget = esensc_budget(n)  # "1x": 2n + 2 coalitions per row
        for rule in ("esensc", "es", "ensc", "esensc_plain"):
            phi, secs = timed(esensc.Explainer(f, bg, link=link, rule=rule).attribute, X)
            add(rule, phi, truth, fx, secs)
        for m in multiples_k:
            phi, secs = timed(kernel_shap, f, bg, X, m * budget, link=link, seed=seed)
            add(f"kernel@{m}x", phi, truth, fx, secs)
        for m in [] if args.quick else [1]:
            phi, secs = timed(kernel_shap, f, bg, X, m * budget, link=link, seed=seed, l1_reg=False)
            add(f"kernel_noL1@{m}x", phi, truth, fx, secs)
        for m in multiples_p:
            phi, secs = timed(permutation_shap, f, bg, X, m * budget, link=link, seed=seed)
            add(f"permutation@{m}x", phi, truth, fx, secs)
        for method in [] if args.quick else SHAPIQ_METHODS:  # importing shapiq takes ~10 s
            phi, secs = timed(shapiq_values, method, f, bg, X, budget, link=link, seed=seed)
            add(f"shapiq.{method}@1x", phi, truth, fx, secs)
    return _accuracy_outcome(cfg, args, vals, n, multiples_k, multiples_p)


def _accuracy_outcome(
    cfg: Config, args: argparse.Namespace, vals: dict[tuple[str, str], list[float]], n: int,
    multiples_k: list[int], multiples_p: list[int],
) -> Outcome:  # fmt: skip
    hib = {"deviation": False, "spearman": True, "top5_overlap": True, "time_s": False,
           "order3_shapley_share": None}  # fmt: skip
    mean = {key: float(np.mean(v)) for key, v in vals.items()}
    d = {m: mean[(m, "deviation")] for (m, k) in mean if k == "deviation"}
    rho = mean[("esensc", "spearman")]
    d_e, d_k = d["esensc"], d["kernel@1x"]
    d_perm = d.get("permutation@1x", math.nan)  # not run in --quick: the claim is not measured
    d_q = [d.get(f"shapiq.{m}@1x", math.nan) for m in SHAPIQ_METHODS]  # not run in --quick
    claims = [
        check(
            f"{cfg.name}: at equal budget (2n+2 coalitions/row) ESENSC deviation < KernelSHAP "
            "and < permutation SHAP, and ESENSC Spearman >= 0.95",
            d_e < d_k and d_e < d_perm and rho >= 0.95,
            f"dev esensc {d_e:.4g} / kernel@1x {d_k:.4g} / permutation@1x {_g(d_perm)}; "
            f"spearman {rho:.3f}",
            inputs=[d_e, d_k, d_perm, rho],
        ),
        check(
            f"{cfg.name}: at equal budget ESENSC deviation < shapiq's " + ", ".join(SHAPIQ_METHODS),
            all(d_e < x for x in d_q),
            f"esensc {d_e:.4g}; "
            + ", ".join(f"{m} {_g(x)}" for m, x in zip(SHAPIQ_METHODS, d_q, strict=True)),
            inputs=[d_e, *d_q],
        ),
    ]
    match = [m for m in multiples_k if d[f"kernel@{m}x"] <= d_e]
    need = f"{match[0]}x" if match else f"> {multiples_k[-1]}x"
    if cfg.name in KERNEL_2X_CONFIGS:
        claims.append(
            compare(
                f"{cfg.name}: KernelSHAP at 2x budget still has higher deviation than ESENSC",
                d["kernel@2x"],
                ">",
                d_e,
                measured=f"kernel@2x {d['kernel@2x']:.4g} vs esensc {d_e:.4g}; KernelSHAP "
                f"matches ESENSC at budget {need}",
            )
        )
    B, R = (12, 6) if args.quick else (50, 40)
    config = {
        "dataset": cfg.dataset,
        "model": cfg.model,
        "n_features": n,
        "n_background": B,
        "n_explain": R,
        "budget_per_row": f"2n+2 = {2 * n + 2} coalitions",
        "kernel_multiples": multiples_k,
        "permutation_multiples": multiples_p,
        "shapiq_methods": [f"shapiq.{m} at 1x (first-order values)" for m in SHAPIQ_METHODS],
        "kernel_l1_reg": "shap default num_features(10); kernel_noL1 rows use l1_reg=False",
        "truth": "esensc.exact_shapley" if cfg.model == "mlp" else "TreeSHAP interventional",
        "kernel_budget_to_match_esensc": need,
    }
    return Outcome(
        config, _rows(vals, hib), claims, extra_plots={"budget": plot_budget}, **ACCURACY_PLOT
    )


def scaling(args: argparse.Namespace) -> Outcome:
    ns = [16, 32, 64] if args.quick else [64, 128, 256, 512]
    B, R = (8, 4) if args.quick else (50, 20)
    trees = 40 if args.quick else 200
    vals: dict[tuple[str, str], list[float]] = {}
    for seed in args.seeds:
        for n in ns:
            model, Xtr, Xte = friedman_xgb(n, seed, trees)
            Xte = Xte[:R]
            bg = Xtr[np.random.default_rng(seed).choice(500, B, replace=False)]
            f = lambda Z, m=model: m.predict(Z, output_margin=True)  # noqa: E731
            truth = tree_truth(model, bg, Xte)
            fx = f(Xte)
            phi = esensc.Explainer(f, bg).attribute(Xte)
            # the machine is shared: median of interleaved reps, the model's own time beside
            t_e, t_m = interleaved_seconds(f, bg, Xte, 1 if args.quick else SCALING_REPS)
            secs, secs_model = statistics.median(t_e), statistics.median(t_m)
            dev, rho, _ = metrics(phi, truth, fx)
            for metric, v in (("deviation", dev), ("spearman", rho), ("time_s", secs)):
                vals.setdefault((f"esensc n={n}", metric), []).append(v)
            vals.setdefault((f"model predict n={n}", "time_s"), []).append(secs_model)
            if not args.quick and n in (ns[0], ns[-1]):
                php, secp = timed(permutation_shap, f, bg, Xte, esensc_budget(n), seed=seed)
                dev, rho, _ = metrics(php, truth, fx)
                for metric, v in (("deviation", dev), ("spearman", rho), ("time_s", secp)):
                    vals.setdefault((f"permutation@1x n={n}", metric), []).append(v)
    mean = {key: float(np.mean(v)) for key, v in vals.items()}
    times = np.array([mean[(f"esensc n={n}", "time_s")] for n in ns])
    slope = float(np.polyfit(np.log(ns), np.log(times), 1)[0])
    model_times = np.array([mean[(f"model predict n={n}", "time_s")] for n in ns])
    model_slope = float(np.polyfit(np.log(ns), np.log(model_times), 1)[0])
    big = ns[-1]
    rho = mean[(f"esensc n={big}", "spearman")]
    d_e = mean[(f"esensc n={big}", "deviation")]
    d_p = mean.get((f"permutation@1x n={big}", "deviation"), math.nan)  # not run in --quick
    claims = [
        check(
            f"friedman1 XGBoost n={big}: ESENSC Spearman vs interventional TreeSHAP >= 0.90",
            rho >= 0.90,
            f"spearman {rho:.3f}",
            inputs=[rho],
        ),
        compare(
            f"friedman1 XGBoost n={big}: ESENSC deviation below equal-budget permutation SHAP",
            d_e,
            "<",
            d_p,
            measured=f"esensc {d_e:.4g} vs permutation@1x {_g(d_p)}",
        ),
        check(
            f"ESENSC wall time linear in n: log-log slope over n={ns} <= 1.2",
            slope <= 1.2,
            f"slope {slope:.3f} (times {', '.join(f'{t:.2f}' for t in times)} s; the model's "
            f"own predict on the same rows: slope {model_slope:.3f})",
            inputs=[slope],
            # milliseconds (--quick) measure the fixed cost per call, not the growth in n
            degenerate=bool(times.max() < MIN_TIMED_S),
        ),
        check(
            "ESENSC adds no cost that grows faster than the model's: its log-log slope over n "
            "exceeds the model's own on its (2n+1)·B rows by <= 0.05",
            slope <= model_slope + 0.05,
            f"esensc {slope:.3f} vs model predict {model_slope:.3f} "
            f"(model times {', '.join(f'{t:.2f}' for t in model_times)} s)",
            inputs=[slope, model_slope],
            degenerate=bool(times.max() < MIN_TIMED_S),
        ),
    ]
    config = {
        "n_features": ns,
        "n_background": B,
        "n_explain": R,
        "trees": trees,
        "max_depth": 4,
        "loglog_slope": slope,
        "model_loglog_slope": model_slope,
        "timing": f"median of {SCALING_REPS} interleaved reps of esensc and of the model's own "
        "predict on the same rows (seeds averaged), after one warm-up of each",
    }
    hib = {"deviation": False, "spearman": True, "time_s": False}
    return Outcome(
        config, _rows(vals, hib), claims, extra_plots={"curves": plot_scaling}, **ACCURACY_PLOT
    )


def main(argv: list[str] | None = None) -> int:
    """Run the accuracy, scaling, overhead and saturation benchmarks."""
    benchmarks = {cfg.name: partial(accuracy, cfg) for cfg in CONFIGS}
    benchmarks["friedman1_scaling"] = scaling
    benchmarks["friedman1_overhead"] = overhead_benchmark
    benchmarks["wine_mlp_saturation"] = saturation_benchmark
    return run_suite(
        PACKAGE,
        benchmarks,
        argv,
        description="esensc reproduction: accuracy vs exact SHAP and scaling in n",
    )


if __name__ == "__main__":
    raise SystemExit(main())
