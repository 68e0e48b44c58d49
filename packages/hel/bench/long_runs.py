"""Helpers of bench/run.py for long sequences: memory job, gradient cosines, step times.

The default network of the memory benchmark (n = 32, B = 8, one input channel) is chaotic:
its BPTT gradient grows by about 1e4 per 1000 steps, so every long-sequence measurement here
runs in float64 (float32 overflows near T = 8000).
"""

from __future__ import annotations

import math
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from hel import BPTT, EchoRNN, HamiltonianEcho, HopfieldOscillatorCell, compare_estimators
from methodkit.bench import Claim, Outcome, ResultRow, check, compare, peak_memory
from methodkit.torch import generator

#: Estimators of the memory benchmark: name -> HamiltonianEcho options (``None``: BPTT).
LONG_KINDS: dict[str, dict[str, Any] | None] = {
    "bptt": None,
    "hel_two_pass": {"mode": "two_pass"},
    "hel_centered": {"mode": "centered", "checkpoint_every": None},
    "hel_linearized": {"mode": "linearized", "checkpoint_every": None},
    "hel_centered_ckpt50": {"mode": "centered", "checkpoint_every": 50},
    "hel_linearized_ckpt100": {"mode": "linearized", "checkpoint_every": 100},
    "hel_default": {},  # HamiltonianEcho(model, loss_fn): mode and interval chosen by the echo
}
MEMORY_KINDS = ["bptt", "hel_two_pass", "hel_centered", "hel_centered_ckpt50",
                "hel_linearized_ckpt100"]  # fmt: skip
MEMORY_T = [200, 2000, 20000]
MEMORY_T_QUICK = [200, 400]
STEP_T = [200, 2000]
STEP_T_QUICK = [50, 200]
STEP_KINDS = ["bptt", "hel_centered", "hel_two_pass", "hel_linearized", "hel_centered_ckpt50"]


def long_setup(T: int, n: int = 32, B: int = 8) -> tuple:
    """The seeded default network and a random batch of length ``T`` (float64)."""
    g = generator(0)
    model = EchoRNN(HopfieldOscillatorCell(1, n, generator=g), 4).double()
    x = torch.randn(B, T, 1, generator=g, dtype=torch.float64)
    y = torch.randint(0, 4, (B,), generator=g)
    return model, x, y, torch.nn.CrossEntropyLoss()


def make_long(kind: str, model: EchoRNN, loss: Any) -> Any:
    """The estimator named ``kind`` in :data:`LONG_KINDS`."""
    opts = LONG_KINDS[kind]
    return BPTT(model, loss) if opts is None else HamiltonianEcho(model, loss, **opts)


def memory_job(kind: str, T: int) -> None:
    """One warm-up and one backward call of ``kind`` on T steps (picklable, for peak_memory)."""
    torch.set_num_threads(1)
    model, x, y, loss = long_setup(T)
    est = make_long(kind, model, loss)
    warnings.simplefilter("ignore")  # the plain echo warns at long T; measured separately
    est.backward(x[:, :5], y)  # warm-up: allocator, lazy imports
    est.backward(x, y)


def saved_tensor_mb(kind: str, T: int) -> float:
    """MiB of tensors autograd saves for backward in one call (in-process; the quick probe)."""
    model, x, y, loss = long_setup(T)
    est = make_long(kind, model, loss)
    total = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        total[0] += t.numel() * t.element_size()
        return t

    with warnings.catch_warnings(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        warnings.simplefilter("ignore")
        est.backward(x, y)
    return total[0] / 2**20


def long_cosines(T: int, kinds: list[str]) -> dict[str, dict[str, float]]:
    """Cosine to BPTT and the reversibility error of every echo kind at length ``T``."""
    model, x, y, loss = long_setup(T)
    ests = {k: make_long(k, model, loss) for k in kinds if LONG_KINDS[k] is not None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = compare_estimators(model, (x, y), loss, ests)
    out = {}
    for k, est in ests.items():
        rep = est.reversibility
        err = rep.max_error if rep is not None else float("nan")
        out[k] = {"cosine": res[k]["cosine"], "reversibility_error": err}
    return out


def step_times(T: int, kinds: list[str], reps: int, n: int = 64, B: int = 64) -> dict:
    """Median wall time of one ``backward`` per kind, interleaved (float32, n=64, B=64)."""
    g = generator(1)
    model = EchoRNN(HopfieldOscillatorCell(1, n, generator=g), 10)
    x = torch.randn(B, T, 1, generator=g)
    y = torch.randint(0, 10, (B,), generator=g)
    ests = {k: make_long(k, model, torch.nn.CrossEntropyLoss()) for k in kinds}
    times: dict[str, list[float]] = {k: [] for k in kinds}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for e in ests.values():  # warm-up
            e.backward(x[:, :5], y)
        for _ in range(reps):
            for k, e in ests.items():
                t0 = time.perf_counter()
                e.backward(x, y)
                times[k].append(time.perf_counter() - t0)
    return {k: sorted(v)[len(v) // 2] for k, v in times.items()}


def memory_curve(peak: dict[tuple[str, int], float], Ts: list[int], path: Path) -> None:
    """Peak memory against T, one line per estimator (log x axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for k in MEMORY_KINDS:
        ax.plot(Ts, [peak[(k, T)] for T in Ts], marker="o", label=k)
    ax.set_xscale("log")
    ax.set_xlabel("sequence length T (steps)")
    ax.set_ylabel("peak memory above import torch (MiB)")
    ax.set_title("warm-up + one backward call (n=32, B=8, float64)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _memory_claims(growth: dict, cos: dict, Ts: list[int], quick: bool) -> list[Claim]:
    # Memory counts only where the gradient holds: each echo kind's claim needs its cosine
    # to BPTT >= 0.9999 at every measured T. The quick run's range is too short to tell.
    claims = []
    for k in MEMORY_KINDS[1:]:
        worst = min(cos[(k, T)]["cosine"] for T in Ts)
        claims.append(
            check(
                f"{k}: cosine to BPTT >= 0.9999 at every T and peak memory grows < 50 MB "
                f"from T={Ts[0]} to T={Ts[-1]}",
                worst >= 0.9999 and growth[k] < 50,
                f"min cosine {worst:.6f}, growth {growth[k]:.1f} MB",
                inputs=[worst, growth[k], growth["bptt"]],
                degenerate=quick or not growth["bptt"] > 0,
            )
        )
    claims.append(
        check(
            f"BPTT: peak memory grows > 150 MB from T={Ts[0]} to T={Ts[-1]}",
            growth["bptt"] > 150,
            f"{growth['bptt']:.1f} MB",
            inputs=[growth["bptt"]],
            degenerate=quick,
        )
    )
    return claims


def memory(args: Any) -> Outcome:
    """Peak memory of one backward call against T, with each estimator's cosine to BPTT."""
    Ts = MEMORY_T_QUICK if args.quick else MEMORY_T
    peak, cos = {}, {}
    for T in Ts:
        for k, v in long_cosines(T, [k for k in LONG_KINDS if k != "hel_default"]).items():
            cos[(k, T)] = v
        for kind in MEMORY_KINDS:
            mb = saved_tensor_mb(kind, T) if args.quick else peak_memory(memory_job, args=(kind, T))
            peak[(kind, T)] = mb if args.quick else mb / 2**20
    unit = "saved_tensor_mb" if args.quick else "extra_peak_rss_mb"
    rows = [
        ResultRow.from_values(k, f"{unit}_T{T}", [peak[(k, T)]], False)
        for k in MEMORY_KINDS
        for T in Ts
    ]
    rows += [
        ResultRow.from_values(k, f"{m}_T{T}", [cos[(k, T)][m]], m == "cosine")
        for k in LONG_KINDS
        if k not in ("bptt", "hel_default")  # the default has its own benchmark
        for T in Ts
        for m in ("cosine", "reversibility_error")
        if math.isfinite(cos[(k, T)][m])  # two_pass has no reversibility report
    ]
    growth = {k: peak[(k, Ts[-1])] - peak[(k, Ts[0])] for k in MEMORY_KINDS}
    growth_metric = f"{unit.replace('_mb', '')}_growth_mb_T{Ts[0]}_to_T{Ts[-1]}"
    rows += [ResultRow.from_values(k, growth_metric, [growth[k]], False) for k in MEMORY_KINDS]
    cfg = {
        "n": 32,
        "batch": 8,
        "dtype": "float64 (the chaotic default network's BPTT gradient overflows float32)",
        "T": Ts,
        "measure": "full run: methodkit.bench.peak_memory, a fresh spawned process per "
        "(estimator, T): warm-up on 5 steps, then one backward call on T steps; peak RSS above "
        "the RSS after import torch, MiB. --quick: MiB of tensors saved for backward "
        "(in-process, no spawn). Cosines: compare_estimators against autograd BPTT of the "
        "same float64 model at every T",
    }
    return Outcome(
        config=cfg,
        results=rows,
        claims=_memory_claims(growth, cos, Ts, args.quick),
        seeds=[0],
        plot_metrics=[growth_metric],
        units={growth_metric: "MiB"},
        extra_plots={"curve": lambda _rec, path: memory_curve(peak, Ts, path)},
    )


def step_time(args: Any) -> Outcome:
    """Wall time of one backward call, HEL vs BPTT side by side (n=64, B=64, float32)."""
    Ts = STEP_T_QUICK if args.quick else STEP_T
    reps = 3 if args.quick else 7
    med = {T: step_times(T, STEP_KINDS, reps) for T in Ts}
    rows = [
        ResultRow.from_values(k, f"step_s_T{T}", [med[T][k]], False) for k in STEP_KINDS for T in Ts
    ]
    rows += [
        ResultRow.from_values(k, f"time_ratio_to_bptt_T{T}", [med[T][k] / med[T]["bptt"]], False)
        for k in STEP_KINDS[1:]
        for T in Ts
    ]
    claims = [
        compare(
            f"HEL (centered) step time <= BPTT step time at T={T}",
            med[T]["hel_centered"],
            "<=",
            med[T]["bptt"],
            measured=f"{med[T]['hel_centered']:.3f} s vs {med[T]['bptt']:.3f} s "
            f"(ratio {med[T]['hel_centered'] / med[T]['bptt']:.2f})",
        )
        for T in Ts
    ]
    cfg = {"n": 64, "batch": 64, "T": Ts, "reps": reps, "statistic": "median, interleaved"}
    return Outcome(config=cfg, results=rows, claims=claims, seeds=[0])
