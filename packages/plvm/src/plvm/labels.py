"""Target strategy labels from complete target traces."""

from __future__ import annotations

import numpy as np

from methodkit.checks import check_real
from plvm.traces import SWITCHED, TraceSet

__all__ = ["mean_run_length", "run_length_labels", "zone_strategy_labels"]


def mean_run_length(traces: TraceSet, task: str) -> np.ndarray:
    """Events per zone visit of every trace in ``task`` (NaN where the task is missing)."""
    traces.check_tasks([task])
    out = np.full(len(traces), np.nan)
    for i, tr in enumerate(traces.events[task]):
        if tr is not None and len(tr):
            visits = 1.0 + tr[1:, SWITCHED].sum()
            out[i] = len(tr) / visits
    return out


def zone_strategy_labels(
    traces: TraceSet,
    task: str,
    rule: str = "run_length",
    threshold: str | float = "median",
) -> np.ndarray:
    """Zone Planner (1) vs Zone Hopper (0) from the (complete) traces of ``task``.

    Rule ``"run_length"``: a person is a Zone Planner iff the mean run length (events per
    zone visit) exceeds ``threshold`` (``"median"`` = the population median of the persons
    with a trace). Persons without a trace get NaN.

    Raises:
        ValueError: On an unknown task, rule or threshold (or a NaN/inf threshold).
    """
    if rule != "run_length":
        raise ValueError(f"unknown rule {rule!r}; choose 'run_length'")
    rl = mean_run_length(traces, task)
    if threshold == "median":
        thr = float(np.nanmedian(rl))
    elif isinstance(threshold, int | float) and not isinstance(threshold, bool):
        thr = check_real("threshold", threshold)
    else:
        raise ValueError(f"threshold must be 'median' or a number, got {threshold!r}")
    y = (rl > thr).astype(np.float64)
    y[np.isnan(rl)] = np.nan
    return y


def run_length_labels(traces: TraceSet, task: str) -> np.ndarray:
    """:func:`zone_strategy_labels` with the default rule (run length above the median)."""
    return zone_strategy_labels(traces, task)
