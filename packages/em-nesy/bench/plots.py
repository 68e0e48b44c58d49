"""The figures beside the standard bar plot, drawn from a record alone (no re-run needed)."""

from __future__ import annotations

from pathlib import Path


def plot_accuracy_by_n(rec: dict, path: Path) -> None:
    """Sum and digit accuracy per method, grouped by N."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rec["results"] if r["metric"] in ("sum_accuracy", "digit_accuracy")]
    methods = sorted({r["method"].split("@")[0] for r in rows}, key=lambda m: (m != "em_dp", m))
    ns = sorted({int(r["method"].split("=")[1]) for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    width = 0.8 / max(len(methods), 1)
    for ax, metric in zip(axes, ("sum_accuracy", "digit_accuracy"), strict=False):
        for j, m in enumerate(methods):
            xs, ys, es = [], [], []
            for i, n in enumerate(ns):
                sel = [r for r in rows if r["method"] == f"{m}@N={n}" and r["metric"] == metric]
                if sel:
                    xs.append(i + j * width)
                    ys.append(sel[0]["mean"])
                    es.append(sel[0]["std"])
            ax.bar(xs, ys, width, yerr=es, label=m, capsize=2)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(ns))], [f"N={n}" for n in ns])
        ax.set_ylabel(f"{metric} (fraction)")
        ax.set_ylim(0, 1.05)
    axes[1].legend(fontsize=7, loc="lower left")
    fig.suptitle(rec["benchmark"])
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def plot_estep_scaling(rec: dict, path: Path) -> None:
    """E-step (and exact-gradient) time per example against N."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for m in ("em_dp", "em_bp", "exact_gradient"):
        pts = sorted((int(k), v) for k, v in rec["config"]["estep_us_per_example"][m].items())
        label = {
            "em_dp": "E-step AdditionDP",
            "em_bp": "E-step BP",
            "exact_gradient": "exact gradient fwd+bwd",
        }[m]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
    ax.set_xlabel("N (digits per operand)")
    ax.set_ylabel("time per example (µs)")
    ax.legend()
    ax.set_title("symbolic-side cost per example, batch 32")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
