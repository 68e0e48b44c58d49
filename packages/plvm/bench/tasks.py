"""Benchmark helpers for bench/run.py: one scenario = simulate, run every model, build claims."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from methodkit.bench import ResultRow, check, compare
from plvm.evaluate import cross_task_benchmark
from plvm.sim import simulate_population

TAUS = (0.1, 0.25, 0.5)
MAIN_TAU = 0.25
FULL = {"n": 3000, "n_train_neural": 2000, "epochs": 100, "patience": 15, "restarts": 2}
QUICK = {"n": 300, "n_train_neural": 200, "epochs": 3, "patience": 2, "restarts": 0}  # smoke
# models on every tau and on A, B and A+B
CURVE_MODELS = ("outcome", "stats", "linear", "plvm")
PROCESS_MODELS = ("stats", "linear", "plvm")
METRICS = {"auroc": True, "balanced_accuracy": True, "brier": False, "probe_r2": True,
           "fit_s": False}  # fmt: skip


def protocol(quick: bool) -> dict[str, Any]:
    """The run's sizes, with the stated scale factor of the neural training."""
    cfg = dict(QUICK if quick else FULL)
    cfg.update(
        taus=list(TAUS), train_fraction=2 / 3, latent_dim=2, encoder="deepsets",
        decoder="switch_policy", lambda_y=10.0, hidden=32, batch_size=128, lr=3e-3,
        validation_fraction=0.2, max_len=40, chance_margin=0.01,
        scale_factor=(
            "none: every model trains on all 2,000 training persons; the neural models "
            "(plvm, plvm_moe, concat, late) run up to the spec's 100 epochs with early "
            "stopping (patience 15, counted after the KL warm-up; a fit that ends on a chance "
            "plateau is restarted, at most twice)"
        ),
        outcome_baseline="outcome summaries of the same partial traces (outcome_full: of the "
        "complete source traces, informational)",
    )  # fmt: skip
    return cfg


def run_scenario(scenario: str, seeds: list[int], quick: bool) -> pd.DataFrame:
    """All models on ``scenario`` for every seed (the seed draws the study and the models)."""
    cfg = protocol(quick)
    params = {k: cfg[k] for k in ("epochs", "patience", "hidden", "batch_size", "lr", "lambda_y",
                                   "validation_fraction", "max_len", "restarts",
                                   "chance_margin")}  # fmt: skip
    frames = []
    for seed in seeds[:1] if quick else seeds:
        t0 = time.perf_counter()
        study = simulate_population(cfg["n"], scenario, seed=seed)
        kw = {"seeds": [seed], "n_train_neural": cfg["n_train_neural"], "plvm_params": params}
        frames.append(cross_task_benchmark(study, TAUS, list(CURVE_MODELS), **kw))
        extra = {"outcome_full": [["A", "B"]], "hmm": [["A"], ["B"], ["A", "B"]],
                 "plvm_moe": [["A", "B"]], "concat": [["A", "B"]], "late": [["A", "B"]],
                 "oracle": [["A", "B"]], "target_early": [["T"]]}  # fmt: skip
        if quick:  # keep the smoke run short
            del extra["hmm"]
        frames.append(cross_task_benchmark(study, [MAIN_TAU], extra, **kw))
        print(f"[{scenario}] seed {seed}: {time.perf_counter() - t0:.0f} s", file=sys.stderr,
              flush=True)  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def label(model: str, sources: str, tau: float) -> str:
    return f"{model} {sources} tau={tau:g}"


def result_rows(df: pd.DataFrame) -> list[ResultRow]:
    rows = []
    for (model, sources, tau), g in df.groupby(["model", "sources", "tau"], sort=False):
        for metric, hib in METRICS.items():
            vals = g[metric].to_numpy(dtype=float)
            if np.all(np.isfinite(vals)):
                rows.append(ResultRow.from_values(label(model, sources, tau), metric, vals, hib))
    return rows


def mean_of(df: pd.DataFrame, model: str, sources: str, metric: str = "auroc",
            tau: float = MAIN_TAU) -> float:  # fmt: skip
    g = df[(df.model == model) & (df.sources == sources) & np.isclose(df.tau, tau)]
    return float(g[metric].mean()) if len(g) else math.nan


def calibration_claim(df: pd.DataFrame, scenario: str) -> Any:
    """The world leaves room: oracle-z high, outcome and single-source models well below it."""
    oracle = mean_of(df, "oracle", "A+B")
    outcome = mean_of(df, "outcome", "A+B")
    best_single = max(mean_of(df, "stats", "A"), mean_of(df, "stats", "B"))
    return check(
        f"{scenario}: world calibrated: oracle-z AUROC >= 0.9 and both the outcome baseline "
        "and the best single-source statistics sit >= 0.05 below it (room on the axis)",
        oracle >= 0.9 and outcome <= oracle - 0.05 and best_single <= oracle - 0.05,
        f"oracle {oracle:.3f}, outcome A+B {outcome:.3f}, best single stats {best_single:.3f}",
        inputs=[oracle, outcome, best_single],
    )


def tau_claims(df: pd.DataFrame, scenario: str) -> list[Any]:
    """AUROC non-decreasing in tau (tolerance 0.01) for every process model and source set."""
    claims = []
    for model in PROCESS_MODELS:
        worst, where, vals = math.inf, "", []
        for sources in ("A", "B", "A+B"):
            a = [mean_of(df, model, sources, tau=t) for t in TAUS]
            vals += a
            for i in range(len(a) - 1):
                if a[i + 1] - a[i] < worst:
                    worst, where = a[i + 1] - a[i], f"{sources} tau {TAUS[i]}->{TAUS[i + 1]}"
        claims.append(check(
            f"{scenario}: {model} AUROC non-decreasing in tau in {list(TAUS)} (tol 0.01), "
            "for A, B and A+B",
            worst >= -0.01, f"smallest step {worst:+.3f} ({where})", inputs=vals,
        ))  # fmt: skip
    return claims


def single_task_claim(df: pd.DataFrame, scenario: str) -> Any:
    gaps = {s: mean_of(df, "plvm", s) - mean_of(df, "linear", s) for s in ("A", "B")}
    return check(
        f"{scenario}: every single-task neural PLVM >= PLVMLinear single-task AUROC - 0.03",
        all(g >= -0.03 for g in gaps.values()),
        ", ".join(
            f"{s}: plvm {mean_of(df, 'plvm', s):.3f} vs linear {mean_of(df, 'linear', s):.3f}"
            for s in gaps
        ),
        inputs=[mean_of(df, m, s) for m in ("plvm", "linear") for s in ("A", "B")],
    )


def complementary_claims(df: pd.DataFrame) -> list[Any]:
    poe, lin = mean_of(df, "plvm", "A+B"), mean_of(df, "linear", "A+B")
    best = max(mean_of(df, "plvm", "A"), mean_of(df, "plvm", "B"))
    out = mean_of(df, "outcome", "A+B")
    r2 = {m: {s: mean_of(df, m, s, "probe_r2") for s in ("A", "B", "A+B")}
          for m in ("plvm", "linear")}  # fmt: skip
    claims = [
        calibration_claim(df, "complementary"),
        check("complementary: neural PLVM-PoE A+B AUROC >= 0.92", poe >= 0.92,
              f"{poe:.3f}", inputs=[poe]),
        compare("complementary: PLVM-PoE A+B >= best single-task PLVM + 0.04", poe, ">=", best,
                margin=0.04, measured=f"{poe:.3f} vs best single {best:.3f}"),
        check("complementary: PLVMLinear A+B AUROC >= 0.93", lin >= 0.93, f"{lin:.3f}",
              inputs=[lin]),
        check("complementary: PLVM-PoE and PLVMLinear A+B >= outcome baseline A+B + 0.25",
              poe >= out + 0.25 and lin >= out + 0.25,
              f"plvm {poe:.3f}, linear {lin:.3f}, outcome {out:.3f}", inputs=[poe, lin, out]),
    ]  # fmt: skip
    for m in ("plvm", "linear"):
        v = r2[m]
        claims.append(check(
            f"complementary: {m} latent probe R^2: fused >= 0.6, each single task <= 0.5",
            v["A+B"] >= 0.6 and v["A"] <= 0.5 and v["B"] <= 0.5,
            f"fused {v['A+B']:.3f}, A {v['A']:.3f}, B {v['B']:.3f}", inputs=list(v.values()),
        ))  # fmt: skip
    return claims + tau_claims(df, "complementary") + [single_task_claim(df, "complementary")]


def redundant_claims(df: pd.DataFrame) -> list[Any]:
    poe = mean_of(df, "plvm", "A+B")
    best = max(mean_of(df, "plvm", "A"), mean_of(df, "plvm", "B"))
    claims = [
        calibration_claim(df, "redundant"),
        compare("redundant: PLVM-PoE A+B - best single-task PLVM <= 0.03", poe, "<=", best,
                margin=0.03, measured=f"{poe:.3f} vs best single {best:.3f} "
                f"(gain {poe - best:+.3f})"),
    ]  # fmt: skip
    return claims + tau_claims(df, "redundant") + [single_task_claim(df, "redundant")]


def plot_tau(rec: dict[str, Any], path: Path) -> None:
    """AUROC against the observed fraction tau of the source traces."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from plots import MODEL_WORDS, SOURCES_WORDS

    rows = {r["method"]: r for r in rec["results"] if r["metric"] == "auroc"}
    fig, ax = plt.subplots(figsize=(8.6, 4.2))
    for colour, model in enumerate(CURVE_MODELS):
        for sources, ls in (("A", ":"), ("B", "--"), ("A+B", "-")):
            pts = [(t, rows.get(label(model, sources, t))) for t in TAUS]
            pts = [(t, r) for t, r in pts if r is not None]
            if pts:
                ax.errorbar([t for t, _ in pts], [r["mean"] for _, r in pts],
                            yerr=[r["std"] for _, r in pts], ls=ls, marker="o", ms=3,
                            color=f"C{colour}", capsize=2,
                            label=f"{MODEL_WORDS[model]}, {SOURCES_WORDS[sources]}")  # fmt: skip
    orc = rows.get(label("oracle", "A+B", MAIN_TAU))
    if orc:
        ax.axhline(orc["mean"], color="k", lw=0.8, label="oracle: true latent z")
    ax.set(xlabel="observed fraction tau of each source trace",
           ylabel="test AUROC (higher is better)",
           title=f"plvm, {rec['benchmark']} scenario (mean ± std over seeds)")  # fmt: skip
    ax.set_xticks(TAUS)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
