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
    labels: Mapping[str, str] | None = None,
) -> Path:
    """Draw a record's results, one panel per metric, and save a PNG.

    Each method is a point with a ±std error bar. The y-axis spans the data with a margin
    (not from zero), so differences of a few hundredths stay visible; the axis label says
    what the metric is, its unit and whether higher or lower is better.

    Args:
        record: A record dictionary (``BenchRecord.to_dict()`` or a loaded JSON).
        path: Output PNG path.
        metrics: Metrics to draw, in order (default: all, in order of appearance).
        units: Optional ``{metric: unit}`` added to the y-axis labels.
        labels: Optional ``{metric: words}`` shown instead of the metric's key.

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
    n_methods = max(len({r["method"] for r in rows if r["metric"] == m}) for m in metrics)
    # Each method needs its own x-tick room; many methods wrap the panels onto more rows.
    panel_w = max(3.2, 1.0 + 0.32 * n_methods)
    ncols = max(1, min(len(metrics), int(16 // panel_w) or 1))
    nrows = -(-len(metrics) // ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(panel_w * ncols, 4.2 * nrows), squeeze=False)
    for ax in grid.flat[len(metrics) :]:
        ax.set_visible(False)
    axes = [list(grid.flat[: len(metrics)])]
    for ax, metric in zip(axes[0], metrics, strict=True):
        sel = [r for r in rows if r["metric"] == metric]
        if not sel:
            plt.close(fig)
            raise ValueError(f"no results for metric {metric!r}")
        _draw_panel(ax, sel)
        ax.set_ylabel(axis_label(metric, sel, units or {}, labels or {}), fontsize=8)
    fig.suptitle(f"{record['package']}: {record['benchmark']} ({spread_words(record)})", fontsize=9)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    # a large grid at 100 dpi stays readable and under the ~200 kB a committed plot may take
    fig.savefig(out, dpi=150 if nrows * ncols <= 4 else 100)
    plt.close(fig)
    return out


def spread_words(record: Mapping[str, Any]) -> str:
    """What a point's error bar spans: seeds when each value is a seed, else repetitions.

    >>> spread_words({"seeds": [0, 1, 2], "results": [{"n": 3}]})
    'mean ± std, 3 seeds'
    >>> spread_words({"seeds": [0], "results": [{"n": 3}, {"n": 1}]})
    'mean ± std over up to 3 repetitions of seed 0'
    """
    n = max((r["n"] for r in record["results"]), default=0)
    seeds = list(record.get("seeds") or [])
    if n <= 1 or n == len(seeds):
        return f"mean ± std, {n} seed{'' if n == 1 else 's'}"
    of = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {', '.join(map(str, seeds))}"
    return f"mean ± std over up to {n} repetitions of {of}"


def axis_label(
    metric: str,
    rows: Sequence[Mapping[str, Any]],
    units: Mapping[str, str],
    labels: Mapping[str, str],
) -> str:
    """Words for the metric, its unit, and the direction that is better (from the rows)."""
    text = labels.get(metric, metric.replace("_", " "))
    if metric in units:
        text += f" [{units[metric]}]"
    directions = {r.get("higher_is_better") for r in rows} - {None}
    if len(directions) == 1:
        text += "\n(higher is better)" if directions.pop() else "\n(lower is better)"
    return text


def _draw_panel(ax: Any, sel: Sequence[Mapping[str, Any]]) -> None:
    """Points with error bars; methods that were not measured are named but not drawn."""
    names = [r["method"] for r in sel]
    for i, r in enumerate(sel):
        if r.get("mean") is None:
            ax.annotate(
                "not\nmeasured",
                (i, 0.5),
                xycoords=("data", "axes fraction"),
                ha="center",
                fontsize=6,
                color="grey",
            )
            continue
        ax.errorbar(i, r["mean"], yerr=r["std"], fmt="o", color=f"C{i % 10}", capsize=3)
    ax.set_xticks(range(len(sel)), names, rotation=35, ha="right", fontsize=7)
    ax.set_xlim(-0.6, len(sel) - 0.4)
    ax.margins(y=0.15)
    ax.grid(axis="y", alpha=0.3)
