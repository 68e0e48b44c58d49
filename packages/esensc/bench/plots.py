"""The two figures of bench/run.py beyond the standard bar plot; each reads one record only."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_budget(rec: dict[str, Any], path: Path) -> None:
    """Deviation from exact SHAP of KernelSHAP / permutation SHAP vs budget, ESENSC as a line."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.2, 3.4))
    row = {(r["method"], r["metric"]): r for r in rec["results"]}
    for prefix, mk in (("kernel", "o"), ("kernel_noL1", "^"), ("permutation", "s")):
        ms = sorted(
            int(m.split("@")[1][:-1]) for (m, k) in row
            if k == "deviation" and m.startswith(prefix + "@")
        )  # fmt: skip
        if not ms:  # permutation SHAP is not run in --quick
            continue
        r = [row[(f"{prefix}@{m}x", "deviation")] for m in ms]
        ax.errorbar(ms, [x["mean"] for x in r], yerr=[x["std"] for x in r], marker=mk,
                    label=prefix)  # fmt: skip
    e = row[("esensc", "deviation")]["mean"]
    ax.axhline(e, color="k", ls="--", lw=1, label="esensc (1x)")
    ax.set(yscale="log", xlabel="budget / (2n+2) coalitions per row",
           ylabel="normalised deviation from exact SHAP", title=rec["benchmark"])  # fmt: skip
    # kernel without L1 at 1x can be singular (deviation ~1e28, std larger still): fix the
    # limits from the other means, on the log scale, so the axis stays readable
    finite = [r["mean"] for (m, k), r in row.items() if k == "deviation" and "noL1" not in m]
    ax.set_ylim(min(finite) / 3, 10 * max(finite))
    ax.set_xscale("log", base=2)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def plot_scaling(rec: dict[str, Any], path: Path) -> None:
    """ESENSC wall time and Spearman vs the number of features n (friedman1_scaling)."""
    plt = _pyplot()
    ns, slope = rec["config"]["n_features"], rec["config"]["loglog_slope"]
    row = {(r["method"], r["metric"]): r for r in rec["results"]}
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.4))
    t = [row[(f"esensc n={n}", "time_s")] for n in ns]
    axes[0].errorbar(ns, [r["mean"] for r in t], yerr=[r["std"] for r in t], marker="o",
                     label=f"esensc (slope {slope:.2f})")  # fmt: skip
    if (f"model predict n={ns[0]}", "time_s") in row:  # the model's own time on the same rows
        tm = [row[(f"model predict n={n}", "time_s")] for n in ns]
        m_slope = rec["config"].get("model_loglog_slope", float("nan"))
        axes[0].errorbar(ns, [r["mean"] for r in tm], yerr=[r["std"] for r in tm], marker="s",
                         label=f"model predict on the same rows (slope {m_slope:.2f})")  # fmt: skip
    ref = [t[0]["mean"] * n / ns[0] for n in ns]
    axes[0].plot(ns, ref, "k--", lw=0.8, label="linear in n")
    axes[0].set(xscale="log", yscale="log", xlabel="number of features n",
                ylabel="wall time [s] (lower is better)")  # fmt: skip
    s = [row[(f"esensc n={n}", "spearman")] for n in ns]
    axes[1].errorbar(ns, [r["mean"] for r in s], yerr=[r["std"] for r in s], marker="o",
                     label="esensc")  # fmt: skip
    pn = [n for n in ns if (f"permutation@1x n={n}", "spearman") in row]
    p = [row[(f"permutation@1x n={n}", "spearman")] for n in pn]
    axes[1].errorbar(pn, [r["mean"] for r in p], yerr=[r["std"] for r in p], marker="s",
                     label="permutation@1x")  # fmt: skip
    axes[1].set(xscale="log", xlabel="number of features n",
                ylabel="Spearman vs TreeSHAP (higher is better)")  # fmt: skip
    for ax in axes:
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.minorticks_off()
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(f"esensc: friedman1 XGBoost scaling (mean ± std over {len(rec['seeds'])} seeds)",
                 fontsize=9)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
