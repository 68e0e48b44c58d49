"""Evaluation loop and result rows of the digits-C benchmark (bench/run.py).

Script helpers, not part of the wheel.
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

from tasks import TUNED_AS, run_stream, win_tie_loss

from methodkit.bench import ResultRow


def evaluate(
    model: Any, src: Any, streams: dict, methods: list[str], seeds: list[int], best: dict
) -> tuple[dict, dict, dict, dict]:
    """Accuracy per method and (corruption, severity) cell; timing and calls on severity 5."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    acc = {m: {cell: [] for cell in streams} for m in methods}
    sps = {m: [] for m in methods}
    calls = {m: [] for m in methods}
    curves: dict[str, list[float]] = {}
    for seed in seeds:
        for m in methods:
            secs, n, c_calls, c_batches = 0.0, 0, 0, 0
            for cell, batches in streams.items():
                res = run_stream(m, model, state, seed, src, batches, best.get(TUNED_AS.get(m)))
                acc[m][cell].append(res["accuracy"])
                if cell[1] == 5:
                    secs, n = secs + res["seconds"], n + res["n"]
                    c_calls, c_batches = c_calls + res["forward_passes"], c_batches + len(batches)
                if seed == seeds[0] and cell == next(iter(streams)):
                    curves[m] = res["per_batch"]
            sps[m].append(secs / n)
            calls[m].append(c_calls / c_batches)
            print(f"[seed {seed}] {m:24s} {1e3 * secs / n:.3f} ms/sample", file=sys.stderr)
    return acc, sps, calls, curves


def sev_mean(acc: dict, sev: int, i: int) -> float:
    return statistics.fmean(v[i] for (c, s), v in acc.items() if s == sev)


def result_rows(acc: dict, sps: dict, calls: dict, mem: dict, seeds: list[int]) -> list[ResultRow]:
    """Accuracy per severity and cell, calls, time, memory, and EVA-0's win/tie/loss counts."""
    methods = list(acc)
    rows = []
    for sev, metric in ((5, "mean_accuracy"), (3, "mean_accuracy_sev3")):
        if any(s == sev for _, s in acc[methods[0]]):
            rows += [
                ResultRow.from_values(
                    m, metric, [sev_mean(acc[m], sev, i) for i in range(len(seeds))], True
                )
                for m in methods
            ]
    rows += [
        ResultRow.from_values(m, f"acc_{c}_s{s}", acc[m][(c, s)], True)
        for (c, s) in acc[methods[0]]
        for m in methods
    ]
    rows += [ResultRow.from_values(m, "model_calls_per_batch", calls[m], False) for m in methods]
    rows += [
        ResultRow.from_values(
            m, "ms_per_sample", [statistics.median(1e3 * s for s in sps[m])], False
        )
        for m in methods
    ]
    rows += [ResultRow.from_values(m, "peak_memory_mib", [v], False) for m, v in mem.items()]
    cell_mean = {m: {k: statistics.fmean(v) for k, v in acc[m].items()} for m in methods}
    for other in ("FOA", "FOA (3 passes)", "Tent", "DeYO"):
        if other in cell_mean:
            wtl = win_tie_loss(cell_mean["EVA-0"], cell_mean[other])
            rows += [
                ResultRow.from_values(f"EVA-0 vs {other}", k, [float(v)], None)
                for k, v in zip(("cells_won", "cells_tied", "cells_lost"), wtl, strict=True)
            ]
    return rows
