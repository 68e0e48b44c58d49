"""Wall time of one ENGINE step against one MeZO step, measured side by side.

Each model gets a MeZO, a default ENGINE (fine direction regenerated, no tensor kept) and an
``ENGINE(fine_buffer=True)`` on identical copies. Their steps are interleaved (MeZO, ENGINE,
ENGINE-buffered, MeZO, ...) so that load on the machine hits all three alike. ENGINE starts
with a full ring buffer (``history`` fine probes, loaded through ``load_state_dict``) and one
untimed V-cycle, so the timed cycles are steady state: every coarse step injects ``h``.

Where the time goes: every step also counts the noise numbers it draws (``torch.randn``, which
``methodkit.zo.sample`` and the samplers call), in units of one full-size draw (as many numbers
as the model has parameters), and every round times one full-size draw (``zo.sample`` of every
tensor) beside the steps.
"""

from __future__ import annotations

import copy
import os
import statistics
import time
from collections.abc import Callable
from typing import Any, Self

import torch
from memory import wide_mlp
from tasks import digits_task

from engine_zo import Engine, MeZO
from methodkit import zo
from methodkit.bench import Claim, ResultRow, check

EPS, LR = 1e-3, 1e-6
LIMIT = 1.3
VARIANTS = {"ENGINE": {}, "ENGINE(fine_buffer)": {"fine_buffer": True}}


def wide_model(width: int, depth: int, rows: int = 32) -> tuple[torch.nn.Module, Callable]:
    """The memory benchmark's wide tanh MLP on a batch of ``rows`` (a ~20M-parameter model)."""
    model = wide_mlp(width, depth)
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(0))
    return model, lambda m: m(x).pow(2).mean()


def digits_model() -> tuple[torch.nn.Module, Callable]:
    """Task A's 64-64-64-10 digits MLP with its full-batch cross-entropy."""
    task = digits_task()
    return task.model_fn(), task.loss_fn


def full_history(opt: Engine, seed: int = 99) -> None:
    """Fill the ring buffer with ``history`` synthetic fine probes (seeds and scalars)."""
    sd = opt.state_dict()
    gen = torch.Generator().manual_seed(seed)
    sd["zo"]["buffer_seeds"] = [10_000 + j for j in range(opt.history)]
    sd["zo"]["buffer_half_diffs"] = torch.randn(opt.history, generator=gen).mul(1e-3).tolist()
    opt.load_state_dict(sd)


class RandnSwap:
    """Replaces ``torch.randn`` by ``self._call`` while active (a context manager)."""

    def __init__(self) -> None:
        self._real = torch.randn

    def _call(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._real = torch.randn
        torch.randn = self._call
        return self

    def __exit__(self, *exc: object) -> None:
        torch.randn = self._real


class DrawCounter(RandnSwap):
    """Counts the numbers drawn through ``torch.randn`` while active (a context manager)."""

    def __init__(self) -> None:
        super().__init__()
        self.numbers = 0

    def _call(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = self._real(*args, **kwargs)
        self.numbers += out.numel()
        return out


def full_draw(params: list[torch.Tensor], seed: int) -> float:
    """Seconds of one full-size noise draw: ``zo.sample`` of every tensor, as a probe does."""
    t0 = time.perf_counter()
    for i, p in enumerate(params):
        zo.sample(p, zo.tensor_generator(seed, i, p.device))
    return time.perf_counter() - t0


def time_steps(
    model_fn: Callable, cycles: int, draws: dict[str, dict[str, list[float]]] | None = None
) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """``(seconds, seconds of MeZO's step in the same round)`` by method and step kind
    (``fine``/``coarse``; MeZO's own steps count as ``fine``), steps interleaved.

    ``draws`` (if given) receives, by the same keys, each timed step's noise numbers in
    full-size draws and, under ``"full draw"``, the seconds of one full-size draw per round.
    """
    base, loss_fn = model_fn()
    params = [p.detach() for p in base.parameters()]
    n_params = sum(p.numel() for p in params)
    opts: dict[str, tuple[torch.optim.Optimizer, Callable]] = {}
    for name in ("MeZO", *VARIANTS):
        model = copy.deepcopy(base)
        if name == "MeZO":
            opt = MeZO(model.parameters(), lr=LR, eps=EPS)
        else:
            opt = Engine(model.parameters(), lr=LR, eps=EPS, **VARIANTS[name])
            full_history(opt)
        opts[name] = (opt, lambda m=model: loss_fn(m))
    cycle = opts["ENGINE"][0].cycle_length
    times: dict[str, dict[str, list[tuple[float, float]]]] = {
        n: {"fine": [], "coarse": [], "all": []} for n in opts
    }
    counted: dict[str, dict[str, list[float]]] = {n: {k: [] for k in times[n]} for n in opts}
    counted["full draw"] = {"seconds": []}
    for k in range((cycles + 1) * cycle):
        secs, numbers = {}, {}
        for name, (opt, closure) in opts.items():
            kind = "coarse" if getattr(opt, "level", 0) > 0 else "fine"
            with DrawCounter() as counter:
                t0 = time.perf_counter()
                opt.step(closure)
                secs[name] = (kind, time.perf_counter() - t0)
            numbers[name] = counter.numbers / n_params
        draw_s = full_draw(params, 1_000_000 + k)
        if k >= cycle:  # the first cycle warms up (buffered h built after the load)
            counted["full draw"]["seconds"].append(draw_s)
            for name, (kind, s) in secs.items():
                times[name][kind].append((s, secs["MeZO"][1]))
                times[name]["all"].append((s, secs["MeZO"][1]))  # round order, whole cycles
                counted[name][kind].append(numbers[name])
                counted[name]["all"].append(numbers[name])
    if draws is not None:
        draws.update(counted)
    return times


def paired_ratios(times: dict[str, dict[str, list[tuple[float, float]]]]) -> dict[str, float]:
    """Median over steps of ``ENGINE step / the MeZO step of the same round``, by variant
    and kind, plus each variant's worst coarse step over its round's MeZO step."""
    out = {}
    for name in VARIANTS:
        for kind in ("fine", "coarse"):
            out[f"{name} {kind}"] = statistics.median(e / m for e, m in times[name][kind])
        out[f"{name} worst coarse"] = max(e / m for e, m in times[name]["coarse"])
    return out


def cycle_entry(
    times: dict[str, dict[str, list[tuple[float, float]]]], name: str, cycle: int, label: str
) -> dict:
    """The cost record's entry: ``name``'s step over whole V-cycles beside MeZO's.

    Per timed cycle the ratio is the summed step time over the summed MeZO step time of the
    same rounds (fine and coarse steps in the schedule's proportion); the entry keeps the
    median over cycles and the mean step times.
    """
    pairs = times[name]["all"]
    cycles = [pairs[i : i + cycle] for i in range(0, len(pairs) - cycle + 1, cycle)]
    ratios = [sum(e for e, _ in c) / sum(m for _, m in c) for c in cycles]
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        load = None
    return {
        "axis": f"wall time per optimizer step over a V-cycle ({label})",
        "unit": "ms/step",
        "lower_is_better": True,
        "method": name,
        "value": 1e3 * statistics.fmean(e for e, _ in pairs),
        "peer": "MeZO",
        "peer_value": 1e3 * statistics.fmean(m for _, m in pairs),
        "ratio": statistics.median(ratios) if ratios else None,
        "ratio_reps": ratios,
        "statistic": f"median over {len(ratios)} timed V-cycles of (summed step time / summed "
        "MeZO step time of the same rounds); values: mean per step",
        "reps": len(ratios),
        "load_avg": load,
    }


def draw_summary(draws: dict[str, dict[str, list[float]]]) -> dict:
    """Mean full-size draws per step by method and kind, the median ms of one full-size
    draw, and what those draws cost per step at that rate (ms)."""
    ms_draw = 1e3 * statistics.median(draws["full draw"]["seconds"])
    per_step = {
        name: {kind: statistics.fmean(v) for kind, v in kinds.items() if v}
        for name, kinds in draws.items()
        if name != "full draw"
    }
    return {
        "full_draws_per_step": per_step,
        "ms_per_full_draw": ms_draw,
        "rng_ms_per_step": {
            name: {kind: d * ms_draw for kind, d in kinds.items()}
            for name, kinds in per_step.items()
        },
    }


def draw_rows(label: str, draws: dict[str, dict[str, list[float]]]) -> list[ResultRow]:
    """Rows: full-size draws per step by method and kind, and ms per full-size draw."""
    rows = [
        ResultRow.from_values(f"{label}: {name} {kind}", "full_draws_per_step", values)
        for name, kinds in draws.items()
        if name != "full draw"
        for kind, values in kinds.items()
        if values
    ]
    seconds = draws["full draw"]["seconds"]
    rows.append(
        ResultRow.from_values(
            f"{label}: one full-size noise draw", "ms_per_full_draw", [1e3 * x for x in seconds]
        )
    )
    return rows


def measure(
    models: dict[str, tuple[Callable, int, bool]],
) -> tuple[list[ResultRow], list[Claim], dict]:
    """Rows, claims and config for ``{label: (model_fn, cycles, degenerate)}``."""
    rows, claims, config = [], [], {}
    for label, (model_fn, cycles, degenerate) in models.items():
        draws: dict[str, dict[str, list[float]]] = {}
        times = time_steps(model_fn, cycles, draws)
        n_params = sum(p.numel() for p in model_fn()[0].parameters())
        config[label] = {"params": n_params, "timed_cycles": cycles, **draw_summary(draws)}
        rows += draw_rows(label, draws)
        cycle = Engine(model_fn()[0].parameters(), lr=LR).cycle_length
        # the last model (the largest) ends up as the record's cost list, default first
        config["cost"] = [cycle_entry(times, n, cycle, label) for n in VARIANTS]
        for e in config["cost"]:
            claims.append(
                check(
                    f"{label}: {e['method']} step over a whole V-cycle <= {LIMIT} x MeZO's "
                    "(median over cycles)",
                    e["ratio"] is not None and e["ratio"] <= LIMIT,
                    f"{e['ratio'] or float('nan'):.2f} x ({e['value']:.1f} vs "
                    f"{e['peer_value']:.1f} ms per step)",
                    inputs=[e["ratio"]],
                    degenerate=degenerate,
                )
            )
        ms = {}
        for name, kinds in times.items():
            for kind, pairs in kinds.items():
                if pairs:
                    ms[f"{name} {kind}"] = statistics.median(1e3 * s for s, _ in pairs)
                    values = [1e3 * s for s, _ in pairs]
                    rows.append(
                        ResultRow.from_values(f"{label}: {name} {kind}", "ms_per_step", values)
                    )
        mezo_ms = ms["MeZO fine"]
        note = "; quick run: not the claim's model" if degenerate else ""
        for key, ratio in paired_ratios(times).items():
            rows.append(ResultRow.from_values(f"{label}: {key}", "time_ratio_to_MeZO", [ratio]))
            if "worst" in key:
                continue
            claims.append(
                check(
                    f"{label}: {key} step <= {LIMIT} x the MeZO step beside it (median)",
                    ratio <= LIMIT,
                    f"{ratio:.2f} x ({ms[key]:.1f} ms vs MeZO {mezo_ms:.1f} ms, medians){note}",
                    inputs=[ms[key], mezo_ms],
                    degenerate=degenerate,
                )
            )
        text = ", ".join(f"{k} {v:.2f}x" for k, v in paired_ratios(times).items())
        print(f"  step time {label}: MeZO {mezo_ms:.1f} ms; {text}", flush=True)
        per_step = config[label]["full_draws_per_step"]
        text = ", ".join(f"{n} {k} {d:.2f}" for n, ks in per_step.items() for k, d in ks.items())
        ms_draw = config[label]["ms_per_full_draw"]
        print(f"  full-size draws per step ({ms_draw:.1f} ms each): {text}", flush=True)
    return rows, claims, config


def forward_ms(model_fn: Callable, reps: int = 3) -> float:
    """Median milliseconds of one forward pass (the loss) of ``model_fn``'s model."""
    model, loss_fn = model_fn()
    seconds = []
    with torch.no_grad():
        for _ in range(reps):
            t0 = time.perf_counter()
            loss_fn(model)
            seconds.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(seconds)


def rows_sweep(
    width: int, depth: int, batches: tuple[int, ...], cycles: int, degenerate: bool
) -> tuple[list[ResultRow], list[Claim], dict]:
    """The V-cycle step ratio to MeZO as the rows per step (the forward pass's cost) grow.

    A default ENGINE coarse step draws about 8x MeZO's noise numbers (its passes rebuild
    ``h``); that overhead is fixed per step while the forward passes grow with the batch, so
    the ratio depends on the workload. Rows: per batch, the per-cycle ratios, the forward
    pass in ms and in full-size noise draws.
    """
    rows, config, ratios = [], {}, {}
    for batch in batches:
        model_fn = lambda b=batch: wide_model(width, depth, b)  # noqa: E731
        draws: dict[str, dict[str, list[float]]] = {}
        times = time_steps(model_fn, cycles, draws)
        cycle = Engine(model_fn()[0].parameters(), lr=LR).cycle_length
        fwd = forward_ms(model_fn)
        ms_draw = draw_summary(draws)["ms_per_full_draw"]
        label = f"{batch} rows"
        entries = {
            n: cycle_entry(times, n, cycle, f"{depth}x{width} MLP, {label}") for n in VARIANTS
        }
        ratios[batch] = entries["ENGINE"]["ratio"]
        config[label] = {
            "forward_ms": fwd,
            "ms_per_full_draw": ms_draw,
            "cost": list(entries.values()),
        }
        for name, e in entries.items():
            rows.append(
                ResultRow.from_values(f"{name}, {label}", "vcycle_ratio_to_MeZO", e["ratio_reps"])
            )
        rows.append(ResultRow.from_values(f"forward pass, {label}", "forward_ms", [fwd]))
        rows.append(
            ResultRow.from_values(
                f"forward pass, {label}", "forward_in_full_draws", [fwd / ms_draw]
            )
        )
        print(f"  {label}: forward {fwd:.0f} ms = {fwd / ms_draw:.2f} draws; "
              f"ENGINE / MeZO {ratios[batch]:.2f}x", flush=True)  # fmt: skip
    first, last = batches[0], batches[-1]
    claims = [
        check(
            f"default ENGINE's V-cycle step ratio to MeZO falls from {first} to {last} rows "
            "per step",
            ratios[last] < ratios[first],
            f"{ratios[first]:.2f}x -> {ratios[last]:.2f}x",
            inputs=[ratios[first], ratios[last]],
            degenerate=degenerate,
        ),
        check(
            f"at {last} rows per step (as many as an LLM batch's tokens) default ENGINE's "
            f"V-cycle step <= {LIMIT} x MeZO's (median over cycles)",
            ratios[last] <= LIMIT,
            f"{ratios[last]:.2f}x",
            inputs=[ratios[last]],
            degenerate=degenerate,
        ),
    ]
    return rows, claims, config
