"""Helper of bench/run.py: the default echo (``HamiltonianEcho(model, loss_fn)``) at long T.

The default picks its own remedy (linearized echo, re-anchoring interval from the monitored
echo error). Measured on the memory benchmark's chaotic network (n = 32, B = 8): cosine to
autograd BPTT, the interval chosen, the states stored, and the peak memory of one call
(``methodkit.bench.peak_memory``) against BPTT's, at T = 200, 2000 and 20000 in float64 (the
network's BPTT gradient overflows float32 near T = 8000), plus float32 cosines up to T = 2000.
"""

from __future__ import annotations

import warnings
from typing import Any

from long_runs import long_setup, make_long, memory_job, saved_tensor_mb

from hel import ReversibilityWarning, compare_estimators
from methodkit.bench import Outcome, ResultRow, check, peak_memory

TS = [200, 2000, 20000]
TS_QUICK = [200, 400]
FLOAT32_MAX_T = 2000


def default_probe(T: int, float32: bool = False) -> dict[str, float]:
    """Cosine to BPTT, chosen interval, stored states and warnings of the default echo."""
    model, x, y, loss = long_setup(T)
    if float32:
        model, x = model.float(), x.float()
    est = make_long("hel_default", model, loss)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ReversibilityWarning)
        cos = compare_estimators(model, (x, y), loss, {"d": est})["d"]["cosine"]
    st = est.last_stats
    return {
        "cosine": cos,
        "checkpoint_every": float(st["checkpoint_every"] or 0),  # 0: no checkpoints needed
        "stored_steps": float(st["stored_steps"]),
        "attempts": float(st["attempts"]),
        "warnings": float(sum(issubclass(w.category, ReversibilityWarning) for w in caught)),
    }


def default_memory(args: Any) -> Outcome:
    """The default echo's cosine to BPTT and peak memory at T = 200 / 2000 / 20000."""
    Ts = TS_QUICK if args.quick else TS
    probe = {T: default_probe(T) for T in Ts}
    probe32 = {T: default_probe(T, float32=True) for T in Ts if T <= FLOAT32_MAX_T}
    peak = {}
    for kind in ("bptt", "hel_default"):
        for T in Ts:
            if args.quick:
                peak[(kind, T)] = saved_tensor_mb(kind, T)
            else:
                peak[(kind, T)] = peak_memory(memory_job, args=(kind, T)) / 2**20
    unit = "saved_tensor_mb" if args.quick else "extra_peak_rss_mb"
    rows = [
        ResultRow.from_values(f"float64/{k}", f"{k}_T{T}", [probe[T][k]], k == "cosine")
        for T in Ts
        for k in ("cosine", "checkpoint_every", "stored_steps", "attempts", "warnings")
    ]
    rows += [
        ResultRow.from_values(f"float32/{k}", f"{k}_T{T}", [probe32[T][k]], k == "cosine")
        for T in probe32
        for k in ("cosine", "checkpoint_every", "stored_steps")
    ]
    rows += [
        ResultRow.from_values(kind, f"{unit}_T{T}", [peak[(kind, T)]], False)
        for kind in ("bptt", "hel_default")
        for T in Ts
    ]
    growth = {k: peak[(k, Ts[-1])] - peak[(k, Ts[0])] for k in ("bptt", "hel_default")}
    worst = min(probe[T]["cosine"] for T in Ts)
    worst32 = min(v["cosine"] for v in probe32.values())
    claims = [
        check(
            f"default HamiltonianEcho: cosine to BPTT >= 0.9999 at every T in {Ts} (float64)",
            worst >= 0.9999,
            f"min {worst:.7f}",
            inputs=[worst],
        ),
        check(
            f"default HamiltonianEcho: cosine to BPTT >= 0.9999 at every T <= {FLOAT32_MAX_T} "
            "(float32)",
            worst32 >= 0.9999,
            f"min {worst32:.7f}",
            inputs=[worst32],
        ),
        check(
            f"default HamiltonianEcho: peak memory grows < 50 MB from T={Ts[0]} to T={Ts[-1]}",
            growth["hel_default"] < 50,
            f"{growth['hel_default']:.1f} MB (BPTT {growth['bptt']:.1f} MB)",
            inputs=[growth["hel_default"], growth["bptt"]],
            degenerate=args.quick or not growth["bptt"] > 0,
        ),
    ]
    cfg = {
        "estimator": "HamiltonianEcho(model, loss_fn): mode='auto' (linearized on the Hopfield "
        "cell), checkpoint_every='auto', default tolerance (1e-3 float64, 3e-4 float32)",
        "n": 32,
        "batch": 8,
        "T": Ts,
        "dtype": "float64 (float32 cosines up to T = 2000: BPTT overflows float32 near 8000)",
        "measure": "cosine: compare_estimators against autograd BPTT on a fresh estimator (its "
        "first call, re-runs included); memory: methodkit.bench.peak_memory, fresh spawned "
        "process per (estimator, T), warm-up on 5 steps then one backward on T steps, peak RSS "
        "above import torch (MiB); --quick: MiB saved for backward, in-process",
    }
    mem = [f"{unit}_T{T}" for T in Ts]
    return Outcome(
        config=cfg,
        results=rows,
        claims=claims,
        seeds=[0],
        plot_metrics=mem,
        units=dict.fromkeys(mem, "MiB"),
    )
