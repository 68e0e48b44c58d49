"""Extra figures of bench/run.py: accuracy against tool calls, and the evidence controls."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _mean(record: dict[str, Any], method: str, metric: str) -> float | None:
    for r in record["results"]:
        if r["method"] == method and r["metric"] == metric:
            return r["mean"]
    return None


def plot_cost(record: dict[str, Any], path: Path) -> None:
    """Accuracy vs mean tool calls per question (the cost axis), one point per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = sorted({r["method"] for r in record["results"]})
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for m in methods:
        acc, calls = _mean(record, m, "acc_overall"), _mean(record, m, "tool_calls")
        if acc is None or calls is None:
            continue
        ax.scatter(calls, acc, s=40)
        ax.annotate(m, (calls, acc), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("tool calls per question")
    ax.set_ylabel("accuracy (mean over seeds)")
    ax.set_title("ShapeTextVQA: accuracy against tool cost")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_types(record: dict[str, Any], path: Path) -> None:
    """Accuracy per question type for Direct, Debate, EVA, its ablations and the control."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    types = ["attribute", "existence", "count", "read", "spatial", "arithmetic"]
    methods = [
        "direct",
        "debate",
        "eva",
        "always_tool",
        "single_shot_tool",
        "no_verify",
        "eva_swapped_evidence",
    ]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    w = 0.8 / len(methods)
    for k, m in enumerate(methods):
        vals = [_mean(record, m, f"acc_{t}") or 0.0 for t in types]
        ax.bar(np.arange(len(types)) + k * w, vals, w, label=m)
    ax.set_xticks(np.arange(len(types)) + 0.4 - w / 2, types)
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, ncol=4, loc="lower left")
    ax.set_title("Accuracy by question type (swapped = OCR/detector outputs of another scene)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
