"""optimizer.step() time of EMA-Nesterov against its base on a 4.9M-parameter MLP (side by side).

Every optimizer owns a copy of the same MLP's parameters with the same fixed gradients; one
step of each runs in turn (order alternating), so machine load hits them alike; medians.
"""

from __future__ import annotations

import itertools
import statistics
import time
from typing import Any

import torch

from ema_nesterov import EMANesterov
from ema_nesterov._kernels import fold_out

#: 256 -> 2048 -> 2048 -> 64 with biases: 4,853,824 parameters.
WIDTHS = (256, 2048, 2048, 64)
#: The quick run's smoke-test size (304,144 parameters).
QUICK_WIDTHS = (64, 512, 512, 16)


def mlp_params(seed: int = 0, widths: tuple[int, ...] = WIDTHS) -> list[torch.nn.Parameter]:
    """The MLP's parameters, each with a fixed random gradient."""
    gen = torch.Generator().manual_seed(seed)
    params = []
    for fan_in, fan_out in itertools.pairwise(widths):
        for shape in ((fan_out, fan_in), (fan_out,)):
            p = torch.nn.Parameter(torch.randn(shape, generator=gen) / fan_in**0.5)
            p.grad = torch.randn(shape, generator=gen)
            params.append(p)
    return params


def state_tensors_per_param(opt: torch.optim.Optimizer, p: torch.Tensor) -> int:
    """Parameter-sized tensors kept between steps for ``p`` (wrapper and base state)."""
    states = [opt.state.get(p, {})]
    states += [b.state.get(p, {}) for b in getattr(opt, "base_optimizers", [])]
    return sum(
        1
        for st in states
        for v in st.values()
        if isinstance(v, torch.Tensor) and v.shape == p.shape
    )


class OnePassFloor:
    """The base step plus one fused pass that reads and writes ``p`` and a buffer ``m``.

    The least any exact wrapper that keeps ``m`` can add to the base step (it has to update
    ``m`` and move ``p`` off the base iterate): timing only, not an optimizer.
    """

    def __init__(self, base: torch.optim.Optimizer) -> None:
        self.base_optimizers = [base]
        self.param_groups = base.param_groups
        self.params = [p for g in base.param_groups for p in g["params"]]
        self.state = {p: {"m": torch.zeros_like(p)} for p in self.params}

    def step(self) -> None:
        self.base_optimizers[0].step()
        fold_out(self.params, [self.state[p]["m"] for p in self.params], 0.9, 1e-3, scale=0.9)


def _optimizers(impl: str, widths: tuple[int, ...]) -> dict[str, torch.optim.Optimizer]:
    def adamw() -> torch.optim.Optimizer:
        kw = {"fused": True} if impl == "fused" else {"foreach": True}
        return torch.optim.AdamW(mlp_params(widths=widths), lr=1e-4, weight_decay=0.1, **kw)

    return {
        f"AdamW({impl})": adamw(),
        f"EMA-Nesterov(AdamW({impl}))": EMANesterov(adamw(), gamma=0.9, beta=1.0),
        f"EMA-Nesterov(AdamW({impl}), two buffers)": EMANesterov(
            adamw(), gamma=0.9, beta=1.0, memory_efficient=False
        ),
        f"AdamW({impl}) + one pass over p and m (floor)": OnePassFloor(adamw()),
    }


def measure_step_time(
    steps: int, warmup: int = 3, widths: tuple[int, ...] = WIDTHS
) -> dict[str, Any]:
    """Median ``step()`` milliseconds and state tensors per parameter, fused and foreach bases."""
    n_params = sum(p.numel() for p in mlp_params(widths=widths))
    out: dict[str, Any] = {"n_params": n_params, "widths": list(widths), "runs": {}}
    for impl in ("fused", "foreach"):
        opts = _optimizers(impl, widths)
        times: dict[str, list[float]] = {n: [] for n in opts}
        names = list(opts)
        for step in range(warmup + steps):
            for name in names if step % 2 == 0 else names[::-1]:
                t0 = time.perf_counter()
                opts[name].step()
                if step >= warmup:
                    times[name].append(time.perf_counter() - t0)
        for name, opt in opts.items():
            p = opt.param_groups[0]["params"][0]
            out["runs"][name] = {
                "step_ms": [1e3 * t for t in times[name]],
                "median_ms": 1e3 * statistics.median(times[name]),
                "state_tensors": state_tensors_per_param(opt, p),
            }
    return out
