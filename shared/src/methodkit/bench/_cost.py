"""Cost suites (issue 51): a method timed beside its peer in one process, and the record entry.

The convention, read by the repository's ``scripts/cost_table.py`` for the root README: a
benchmark named ``cost`` whose ``Outcome.config["cost"]`` lists :func:`cost_entry` dicts,
headline comparison first. Times come from :func:`interleaved` (warm-up, then repetitions in
rotating order, so load on a shared machine hits every function alike); the statistic is the
median over repetitions, never the best one.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

from methodkit.bench._claims import check
from methodkit.bench._record import Claim, load_average


def interleaved(fns: Mapping[str, Callable[[], Any]], reps: int) -> dict[str, list[float]]:
    """Seconds per call of each function, rep by rep, the order rotating every rep.

    One untimed warm-up call of each comes first. With two functions the order alternates
    (method then peer, peer then method, ...).

    Example:
        >>> times = interleaved({"a": lambda: None, "b": lambda: None}, reps=3)
        >>> sorted(times), [len(v) for v in times.values()]
        (['a', 'b'], [3, 3])
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


def cost_entry(
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
    have the same length; otherwise the ratio is the ratio of the medians. The ratio is
    method / peer in the axis's unit.

    Example:
        >>> e = cost_entry("time", "s", True, "m", [2.0, 4.0], "p", [1.0, 2.0])
        >>> e["value"], e["peer_value"], e["ratio"], e["statistic"]
        (3.0, 1.5, 2.0, 'median of 2 interleaved reps')
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
        "load_avg": load_average(),
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
