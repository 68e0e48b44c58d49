"""The arithmetic world's accuracy-versus-cost figure, drawn from a record alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

FAMILIES = [
    ("SC@", "o-"),
    ("cwSC@", "s-"),
    ("BoN@", "^-"),
    ("DeepConf50@", "v--"),
    ("DeepConf90@", "v:"),
    ("prefix-best-of", "d--"),
]


def toy_curves(record: dict[str, Any], path: Path) -> None:
    """Accuracy against generated characters per question (log x), one line per family."""
    curves(record, path, "generated_chars", "characters", (8, 16), "arithmetic chains")


def real_curves(record: dict[str, Any], path: Path) -> None:
    """The same figure for SmolLM2-135M-Instruct, against generated tokens."""
    curves(record, path, "generated_tokens", "tokens", (4, 8), "SmolLM2-135M word problems")


def curves(
    record: dict[str, Any],
    path: Path,
    metric: str,
    unit: str,
    prefix_lens: tuple[int, ...],
    title: str,
) -> None:
    """Accuracy against ``metric`` per question (log x), one line per family.

    Error bars: the population std over seeds of the per-seed accuracies.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = {(r["method"], r["metric"]): r for r in record["results"]}
    names = [r["method"] for r in record["results"] if r["metric"] == "accuracy"]
    mean = {n: rows[n, "accuracy"]["mean"] for n in names}
    chars = {n: rows[n, metric]["mean"] for n in names}
    std = {n: float(np.std(rows[n, "accuracy"]["values"])) for n in names}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for prefix, style in FAMILIES:
        ns = sorted((n for n in names if n.startswith(prefix)), key=lambda n: chars[n])
        if ns:
            ax.errorbar(
                [chars[n] for n in ns],
                [mean[n] for n in ns],
                [std[n] for n in ns],
                fmt=style,
                ms=4,
                capsize=2,
                label=prefix.rstrip("@"),
            )
    for ell, mk in zip(prefix_lens, ("x", "*"), strict=True):
        ns = [n for n in names if n.startswith("PreG") and n.endswith(f"L{ell}")]
        if ns:
            ax.errorbar(
                [chars[n] for n in ns],
                [mean[n] for n in ns],
                [std[n] for n in ns],
                fmt=mk,
                ms=7,
                capsize=2,
                label=f"PreG (prefix {ell})",
            )
    ax.set_xscale("log")
    ax.set_xlabel(f"generated {unit} per question (log)")
    ax.set_ylabel("accuracy")
    ax.set_title(f"{title}: accuracy vs generated {unit} (replay)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
