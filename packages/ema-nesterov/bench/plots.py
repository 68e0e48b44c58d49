"""The two figures beside the standard bar plot, drawn from a record alone (no re-run needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_quadratic(record: dict[str, Any], path: Path) -> None:
    """Iterations against kappa (log-log, with slopes) and the noisy loss floor per gamma."""
    plt = _pyplot()
    cfg, rows = record["config"], record["results"]
    kappas = cfg["kappas"]
    iters: dict[str, dict[str, float]] = {}
    for row in rows:
        if row["metric"].startswith("iters_kappa_"):
            iters.setdefault(row["method"], {})[row["metric"]] = row["mean"]
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    for name, by_metric in iters.items():
        ys = [by_metric[f"iters_kappa_{k:.0e}"] for k in kappas]
        slope = cfg["slopes"]["slope_" + name]
        ax[0].loglog(kappas, ys, "o-", label=f"{name} (slope {slope:.2f})")
    ax[0].set_xlabel("condition number kappa")
    ax[0].set_ylabel("iterations to f <= 1e-6 f(x0)")
    ax[0].legend(fontsize=7)
    ax[0].grid(alpha=0.3, which="both")
    floors = [r for r in rows if r["metric"] == "noisy_floor"]
    ax[1].bar(
        [r["method"] for r in floors],
        [r["mean"] for r in floors],
        yerr=[float(np.std(r["values"])) for r in floors],
        capsize=3,
    )
    noisy = cfg["noisy"]
    ax[1].set_ylabel("mean loss, last quarter (noisy grad)")
    ax[1].set_title(
        f"kappa {noisy['kappa']:g}, lr {noisy['lr']:g}, beta {noisy['beta']:g}, "
        f"noise {noisy['noise_std']:g}",
        fontsize=8,
    )
    fig.suptitle("ema-nesterov: quadratic", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def plot_char_lm(record: dict[str, Any], path: Path) -> None:
    """Validation curves (mean over the seeds that did not diverge) and final losses."""
    plt = _pyplot()
    curves = record["config"]["curves"]
    finals = {r["method"]: r for r in record["results"] if r["metric"] == "val_loss"}
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, (name, curve) in enumerate(curves.items()):
        steps = curve["steps"]
        # a diverged run stops early, so its curve is shorter than the step list
        kept = np.array([c for c in curve["val_loss"] if len(c) == len(steps)])
        if len(kept):
            ax[0].plot(steps, kept.mean(0), label=name, color=f"C{i}")
    ax[0].set_xlabel("step")
    ax[0].set_ylabel("validation loss [nats/byte]")
    ax[0].set_ylim(top=min(4.0, ax[0].get_ylim()[1]))
    ax[0].legend(fontsize=7)
    ax[0].grid(alpha=0.3)
    names = list(finals)
    means = [finals[n]["mean"] for n in names]
    stds = [float(np.std(finals[n]["values"])) for n in names]
    ax[1].bar(range(len(names)), means, yerr=stds, color=[f"C{i}" for i in range(len(names))])
    ax[1].set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
    ax[1].set_ylim(min(means) - 0.05, max(means) + 0.05)
    ax[1].set_ylabel("final validation loss [nats/byte]")
    n_seeds = len(record["seeds"])
    fig.suptitle(f"ema-nesterov: char LM, mean of {n_seeds} seed(s)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
