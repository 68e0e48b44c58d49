"""Default safety: EVA-0 at its library defaults against no adaptation, per model kind.

For every model kind of ``zoo.KINDS`` (ViT/LayerNorm, CNN/BatchNorm, CNN/GroupNorm), every
bundled corruption (``eva0.corruptions.NAMES``) and severities 3 and 5: NoAdapt once, EVA-0
at its defaults over the seeds; the cell's value is the accuracy difference in points.
Script helpers, not part of the wheel.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import numpy as np
from tasks import run_stream, stream

SEVERITIES = [3, 5]


def safety_table(
    model: Any, Xte: Any, yte: Any, corruptions: list[str], seeds: list[int], n_batches: int | None
) -> tuple[dict[tuple[str, int], list[float]], dict[tuple[str, int], float]]:
    """Per (corruption, severity): EVA-0 (defaults) - NoAdapt in points per seed, and NoAdapt."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    deltas, base = {}, {}
    for sev in SEVERITIES:
        for c in corruptions:
            batches = stream(Xte, yte, c, sev)[:n_batches]
            b = run_stream("NoAdapt", model, state, 0, None, batches)["accuracy"]
            eva = [
                run_stream("EVA-0 (defaults)", model, state, s, None, batches)["accuracy"]
                for s in seeds
            ]
            deltas[(c, sev)] = [100 * (a - b) for a in eva]
            base[(c, sev)] = b
    return deltas, base


def safety_plot(tables: dict[str, dict[tuple[str, int], list[float]]], path: Path) -> None:
    """Heat map of the mean difference (points), one panel per severity, kinds x corruptions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(tables)
    cells = list(next(iter(tables.values())))
    corruptions = list(dict.fromkeys(c for c, _ in cells))
    fig, axes = plt.subplots(1, len(SEVERITIES), figsize=(10, 3.2), squeeze=False)
    for ax, sev in zip(axes[0], SEVERITIES, strict=True):
        grid = np.array(
            [[statistics.fmean(tables[k][(c, sev)]) for c in corruptions] for k in kinds]
        )
        im = ax.imshow(grid, cmap="RdBu", vmin=-2, vmax=2)
        for (i, j), v in np.ndenumerate(grid):
            ax.text(j, i, f"{v:+.1f}", ha="center", va="center", fontsize=6)
        ax.set_xticks(range(len(corruptions)), corruptions, rotation=60, fontsize=6, ha="right")
        ax.set_yticks(range(len(kinds)), kinds, fontsize=7)
        ax.set_title(f"severity {sev}: EVA-0 (defaults) - NoAdapt, points", fontsize=8)
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
