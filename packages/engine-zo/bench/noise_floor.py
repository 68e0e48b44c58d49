"""How far a faster noise generator could take the memory-light ENGINE step (issue 51).

A default ENGINE coarse step rebuilds the fine direction ``h`` from its ``K = 8`` seeds in each
of its three passes, where MeZO draws one noise tensor per pass; on a CPU both are bound by
torch's generator (about 3.5 ns per number). This suite times the same interleaved steps
twice in one process: with torch's generator, and with ``torch.randn`` replaced by a copy of a
cached tensor of the requested shape (``CopiedNoise``), the least any generator must do (write
its output). What is left of ENGINE's extra time under copied noise is the rebuilds' memory
traffic (allocations, copies, the axpys that sum ``h``), which no faster generator removes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import torch
from step_time import LIMIT, LR, VARIANTS, RandnSwap, cycle_entry, time_steps, wide_model

from engine_zo import Engine
from methodkit.bench import Claim, ResultRow, check

GENERATORS = ("torch generator", "copied noise")


class CopiedNoise(RandnSwap):
    """While active, ``torch.randn`` returns a copy of one cached normal tensor per
    ``(shape, dtype, device)`` (drawn once, on first request): noise at memory-copy speed."""

    def __init__(self) -> None:
        super().__init__()
        self._cache: dict[tuple, torch.Tensor] = {}

    def _call(self, *size: Any, dtype: torch.dtype | None = None,
              device: Any = None, **_: Any) -> torch.Tensor:  # fmt: skip
        one = len(size) == 1 and isinstance(size[0], Sequence | torch.Size)
        shape = tuple(size[0]) if one else tuple(size)
        key = (shape, dtype, str(device))
        if key not in self._cache:
            gen = torch.Generator().manual_seed(len(self._cache))
            self._cache[key] = self._real(shape, generator=gen, dtype=dtype, device=device)
        return self._cache[key].clone()


def vcycle_ratios(model_fn: Callable, cycles: int, label: str) -> dict[str, dict]:
    """``cycle_entry`` of every variant, with torch's generator and with copied noise."""
    cycle = Engine(model_fn()[0].parameters(), lr=LR).cycle_length
    out = {}
    for generator in GENERATORS:
        with CopiedNoise() if generator == "copied noise" else nullcontext():
            times = time_steps(model_fn, cycles)
        for name in VARIANTS:
            out[f"{name}, {generator}"] = cycle_entry(times, name, cycle, f"{label}, {generator}")
    return out


def floor_sweep(
    width: int, depth: int, batches: tuple[int, ...], cycles: int, degenerate: bool
) -> tuple[list[ResultRow], list[Claim], dict]:
    """Per batch, the V-cycle step ratio to MeZO with torch's generator and copied noise."""
    rows, claims, config = [], [], {}
    for batch in batches:
        label = f"{depth}x{width} MLP, {batch} rows"
        entries = vcycle_ratios(lambda b=batch: wide_model(width, depth, b), cycles, label)
        config[f"{batch} rows"] = {"cost": list(entries.values())}
        for key, e in entries.items():
            rows.append(
                ResultRow.from_values(
                    f"{key}, {batch} rows", "vcycle_ratio_to_MeZO", e["ratio_reps"]
                )
            )
            rows.append(ResultRow.from_values(f"{key}, {batch} rows", "ms_per_step", [e["value"]]))
            rows.append(
                ResultRow.from_values(
                    f"MeZO beside {key}, {batch} rows", "ms_per_step", [e["peer_value"]]
                )
            )
        real, copied = entries["ENGINE, torch generator"], entries["ENGINE, copied noise"]
        print(f"  {label}: default ENGINE / MeZO {real['ratio']:.2f}x with torch's generator, "
              f"{copied['ratio']:.2f}x with copied noise", flush=True)  # fmt: skip
        claims.append(
            check(
                f"{label}: with noise at copy speed (the least any generator does) the default "
                f"ENGINE V-cycle step <= {LIMIT} x MeZO's (median over cycles): a faster "
                "generator alone would meet the limit",
                copied["ratio"] is not None and copied["ratio"] <= LIMIT,
                f"{copied['ratio']:.2f}x copied noise ({copied['value']:.0f} vs "
                f"{copied['peer_value']:.0f} ms per step); {real['ratio']:.2f}x torch's generator "
                f"({real['value']:.0f} vs {real['peer_value']:.0f} ms)",
                inputs=[copied["ratio"]],
                degenerate=degenerate,
            )
        )
    return rows, claims, config
