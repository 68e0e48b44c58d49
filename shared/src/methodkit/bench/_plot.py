"""The standard benchmark plot: one panel per metric, one bar per method, seed error bars."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def plot_results(
    record: Mapping[str, Any],
    path: str | os.PathLike[str],
    metrics: Sequence[str] | None = None,
    units: Mapping[str, str] | None = None,
) -> Path:
    """Draw a record's results as bar charts with ±std error bars and save a 150-dpi PNG.

    Args:
        record: A record dictionary (``BenchRecord.to_dict()`` or a loaded JSON).
        path: Output PNG path.
        metrics: Metrics to draw, in order (default: all, in order of appearance).
        units: Optional ``{metric: unit}`` added to the y-axis labels.

    Returns:
        The path written.

    Raises:
        ImportError: If matplotlib is not installed (``pip install methodkit[bench]``).
        ValueError: If a requested metric has no results.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError("plotting needs matplotlib: pip install 'methodkit[bench]'") from exc

    rows = record["results"]
    if metrics is None:
        metrics = list(dict.fromkeys(r["metric"] for r in rows))
    units = units or {}
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(max(4.0, 3.6 * len(metrics)), 3.6), squeeze=False
    )
    for ax, metric in zip(axes[0], metrics, strict=True):
        sel = [r for r in rows if r["metric"] == metric]
        if not sel:
            plt.close(fig)
            raise ValueError(f"no results for metric {metric!r}")
        names = [r["method"] for r in sel]
        colors = [f"C{i % 10}" for i in range(len(sel))]
        ax.bar(
            range(len(sel)),
            [r["mean"] for r in sel],
            yerr=[r["std"] for r in sel],
            color=colors,
            capsize=3,
            label=names,
        )
        ax.set_xticks(range(len(sel)), names, rotation=30, ha="right", fontsize=8)
        unit = f" [{units[metric]}]" if metric in units else ""
        ax.set_ylabel(f"{metric}{unit}")
        ax.grid(axis="y", alpha=0.3)
    n = max((r["n"] for r in rows), default=0)
    fig.suptitle(f"{record['package']}: {record['benchmark']} (mean ± std, {n} seeds)", fontsize=9)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=150)
    plt.close(fig)
    return out
