"""Helpers of the cost suite (issue 51): interleaved timing, medians, the record's cost entries.

The convention (one ``cost`` benchmark; ``config["cost"]`` lists the comparisons, headline
first) is read by the repository's ``scripts/cost_table.py`` for the root README.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

from methodkit.bench import Claim, check


def load_avg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages now (None where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def interleaved(fns: Mapping[str, Callable[[], Any]], reps: int) -> dict[str, list[float]]:
    """Seconds per call of each function, rep by rep, the order rotating every rep.

    One untimed warm-up call of each first; load on the shared machine then hits every
    function alike, and the statistic is the median over reps (never the best rep).
    """
    for fn in fns.values():
        fn()
    names = list(fns)
    out: dict[str, list[float]] = {k: [] for k in names}
    for rep in range(reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            t0 = time.perf_counter()
            fns[name]()
            out[name].append(time.perf_counter() - t0)
    return out


def entry(
    axis: str,
    unit: str,
    lower_is_better: bool,
    method: str,
    values: list[float],
    peer: str,
    peer_values: list[float],
    statistic: str | None = None,
) -> dict[str, Any]:
    """One comparison of ``config["cost"]``: medians, the median per-rep ratio, load now.

    ``values`` and ``peer_values`` are paired by repetition (same rep, same load) when they
    have the same length; otherwise the ratio is the ratio of the medians.
    """
    value, peer_value = statistics.median(values), statistics.median(peer_values)
    if len(values) == len(peer_values):
        ratios = [a / b for a, b in zip(values, peer_values, strict=True) if b > 0]
    else:
        ratios = [value / peer_value] if peer_value > 0 else []
    return {
        "axis": axis,
        "unit": unit,
        "lower_is_better": lower_is_better,
        "method": method,
        "value": value,
        "peer": peer,
        "peer_value": peer_value,
        "ratio": statistics.median(ratios) if ratios else None,
        "ratio_reps": ratios,
        "statistic": statistic or f"median of {len(values)} interleaved reps",
        "reps": len(values),
        "load_avg": load_avg(),
    }


def stable_ratio(e: Mapping[str, Any], limit: float = 0.25) -> Claim:
    """Measurement quality: the interquartile range of the per-rep ratios is small."""
    r = sorted(e["ratio_reps"])
    if len(r) < 4:
        return check(f"{e['method']} / {e['peer']} ({e['axis']}): ratio stable over reps",
                     False, "too few reps", degenerate=True)  # fmt: skip
    q = statistics.quantiles(r, n=4)
    iqr, med = q[2] - q[0], statistics.median(r)
    return check(
        f"{e['method']} / {e['peer']} ({e['axis']}): the ratio is stable, interquartile range "
        f"of the per-rep ratios <= {limit:.0%} of their median (a load check, not a method claim)",
        iqr <= limit * med,
        f"IQR {iqr:.3g} vs median {med:.3g} over {len(r)} reps; load {e['load_avg']}",
        inputs=[iqr, med],
    )
