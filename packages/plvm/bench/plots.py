"""Readable figures of a scenario record: one row per model and source set, tau as colour.

The runner's standard plot puts every (model, sources, tau) result on one x-axis: 45 labels
overlap. :func:`plot_overview` draws the same numbers (mean ± std over seeds) with the models
on the y-axis in words, so every label has its own line, and the value axis spans the data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: model key -> words for the axis
MODEL_WORDS = {
    "outcome": "outcome summaries (same partial traces)",
    "outcome_full": "outcome summaries (complete traces)",
    "stats": "process statistics + logistic",
    "hmm": "HMM process features",
    "linear": "linear PLVM",
    "plvm": "neural PLVM (product of experts)",
    "plvm_moe": "neural PLVM (mixture of experts)",
    "concat": "no shared latent (concatenation)",
    "late": "late fusion of single-task PLVMs",
    "oracle": "oracle: true latent z",
    "target_early": "early part of the target trace",
}
SOURCES_WORDS = {"A": "task A", "B": "task B", "A+B": "tasks A+B", "T": "target task"}
METRIC_WORDS = {
    "auroc": "test AUROC (higher is better)",
    "probe_r2": "latent probe R² (higher is better)",
}
TAU_COLOURS = {0.1: "C0", 0.25: "C3", 0.5: "C2"}


def words(model: str, sources: str) -> str:
    """Axis label of one model on one source set."""
    return f"{MODEL_WORDS.get(model, model)}, {SOURCES_WORDS.get(sources, sources)}"


def _parse(method: str) -> tuple[str, str, float]:
    """``"plvm A+B tau=0.25"`` -> ``("plvm", "A+B", 0.25)``."""
    model, sources, tau = method.split(" ")
    return model, sources, float(tau.removeprefix("tau="))


def _panel(ax: Any, rows: list[dict[str, Any]], order: list[tuple[str, str]], metric: str) -> None:
    for r in rows:
        model, sources, tau = _parse(r["method"])
        y = order.index((model, sources))
        off = {0.1: -0.22, 0.25: 0.0, 0.5: 0.22}.get(tau, 0.0)
        ax.errorbar(r["mean"], y + off, xerr=r["std"], fmt="o", ms=3.5, capsize=2,
                    color=TAU_COLOURS.get(tau, "k"))  # fmt: skip
    ax.set_yticks(range(len(order)), [words(m, s) for m, s in order], fontsize=7)
    ax.set_ylim(len(order) - 0.5, -0.5)  # first model on top
    ax.set_xlabel(METRIC_WORDS.get(metric, metric), fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    ax.margins(x=0.08)


def plot_overview(rec: dict[str, Any], path: Path) -> None:
    """Test AUROC and latent probe R² of every model and source set, tau as colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    metrics = [m for m in METRIC_WORDS if any(r["metric"] == m for r in rec["results"])]
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 5.4), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        rows = [r for r in rec["results"] if r["metric"] == metric and r.get("mean") is not None]
        order = list(dict.fromkeys(_parse(r["method"])[:2] for r in rows))
        _panel(ax, rows, order, metric)
    taus = sorted({_parse(r["method"])[2] for r in rec["results"]})
    handles = [Line2D([], [], color=TAU_COLOURS.get(t, "k"), marker="o", ls="",
                      label=f"observed fraction τ = {t:g}") for t in taus]  # fmt: skip
    fig.legend(handles=handles, loc="lower center", ncol=len(taus), fontsize=7, frameon=False)
    n = max((r["n"] for r in rec["results"]), default=0)
    fig.suptitle(f"plvm, {rec['benchmark']} scenario: mean ± std over {n} seeds", fontsize=9)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
