"""optimizer.step() time of EMA-Nesterov against its base (side by side), on two models.

A 4.9M-parameter MLP (6 tensors) and a 20M-parameter transformer stack (6 encoder layers,
d 512, 8 heads, MLP 2048, and a 2048 x 512 embedding: 73 tensors). Every optimizer owns a
copy of the same parameters with the same fixed gradients; one step of each runs in turn
(order alternating), so machine load hits them alike; medians.

Designs timed beside the base: the library's default (one buffer, fold before and after
the base step), its two-buffer mode, :class:`CarriedFold` (the fold carried across steps:
one fused pass per step) and :class:`OnePassFloor`.
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


#: The transformer stack: d_model, heads, feed-forward width, layers, embedding rows.
TRANSFORMER = {"d": 512, "heads": 8, "ff": 2048, "layers": 6, "vocab": 2048}
QUICK_TRANSFORMER = {"d": 64, "heads": 4, "ff": 256, "layers": 2, "vocab": 256}


def transformer_params(seed: int = 0, cfg: dict | None = None) -> list[torch.nn.Parameter]:
    """The parameters of an embedding + encoder-layer stack, each with a fixed gradient."""
    cfg = cfg or TRANSFORMER
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        modules = [torch.nn.Embedding(cfg["vocab"], cfg["d"])]
        modules += [
            torch.nn.TransformerEncoderLayer(cfg["d"], cfg["heads"], cfg["ff"])
            for _ in range(cfg["layers"])
        ]
        params = [p for mod in modules for p in mod.parameters()]
        for p in params:
            p.grad = torch.randn_like(p)
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


class CarriedFold:
    r"""EMA-Nesterov with the fold carried across steps: one fused pass after the base step.

    Between steps the buffer holds :math:`u = s\,(\gamma m - (1-\gamma)\theta)` for a
    scalar :math:`s`, instead of :math:`m`. After the base step (``p`` holds
    :math:`\theta_{t+1}`), with :math:`a = 1 - \gamma`, :math:`b'` the next lookahead and
    :math:`c' = \gamma + a b'`, one SGD-with-momentum kernel (the parameter as momentum
    buffer, ``u`` as parameter and gradient) computes

    .. math::

        p &\leftarrow (1 + a b')\, p + (b'/s)\, u = \theta_{t+1} + b' m_{t+1} \\
        u &\leftarrow u - (a^2 s / c')\, p = s' (\gamma m_{t+1} - a \theta_{t+1}),
        \quad s' = s (1 + a / c'),

    reading and writing ``p`` and ``u`` once: the one-pass floor. :math:`m` and
    :math:`\theta` are recovered as :math:`m = (u/s + a p)/c`, :math:`\theta = p - b m`
    (the same cancellation as the library's fold, held between steps instead of during the
    base step). ``s`` grows by ``1 + a/c'`` per step; at ``renorm_at`` ``u`` and ``s`` are
    multiplied by its inverse, a power of two (exact; one pass over ``u`` every ~230 steps
    at gamma 0.9, beta 1). A timing design: constant gamma and beta, every parameter with a
    gradient every step, float32/float64, one dtype and a CPU/CUDA device.
    """

    def __init__(
        self,
        base: torch.optim.Optimizer,
        gamma: float = 0.9,
        beta: float = 1.0,
        renorm_at: float = 2.0**32,
    ) -> None:
        self.base_optimizers = [base]
        self.param_groups = base.param_groups
        self.params = [p for g in base.param_groups for p in g["params"]]
        self.gamma, self.beta, self.renorm_at = gamma, beta, renorm_at
        a = 1.0 - gamma
        self.scale = 1.0 / a  # m_0 = 0, theta_0 = p: u_0 = s_0 (0 - a p) = -p
        self.state = {p: {"u": -p.detach().clone()} for p in self.params}

    @torch.no_grad()
    def step(self) -> None:
        self.base_optimizers[0].step()
        a, b = 1.0 - self.gamma, self.beta
        c = self.gamma + a * b
        us = [self.state[p]["u"] for p in self.params]
        torch._fused_sgd_(
            us,
            us,
            self.params,
            weight_decay=0.0,
            momentum=1.0 + a * b,
            lr=a * a * self.scale / c,
            dampening=1.0 - b / self.scale,
            nesterov=False,
            maximize=False,
            is_first_step=False,
        )
        self.scale *= 1.0 + a / c
        if self.scale >= self.renorm_at:
            torch._foreach_mul_(us, 1.0 / self.renorm_at)
            self.scale /= self.renorm_at

    @torch.no_grad()
    def m(self, p: torch.Tensor) -> torch.Tensor:
        """The increment EMA ``m`` of parameter ``p``."""
        a = 1.0 - self.gamma
        c = self.gamma + a * self.beta
        return (self.state[p]["u"] / self.scale + a * p) / c

    @torch.no_grad()
    def theta(self, p: torch.Tensor) -> torch.Tensor:
        """The base iterate ``theta`` of parameter ``p``."""
        return p - self.beta * self.m(p)


def _optimizers(impl: str, params_fn) -> dict[str, Any]:  # noqa: ANN001
    def base() -> torch.optim.Optimizer:
        if impl == "SGD":
            return torch.optim.SGD(params_fn(), lr=1e-4, momentum=0.9, foreach=True)
        kw = {"fused": True} if impl == "fused" else {"foreach": True}
        return torch.optim.AdamW(params_fn(), lr=1e-4, weight_decay=0.1, **kw)

    name = "SGD(momentum, foreach)" if impl == "SGD" else f"AdamW({impl})"
    return {
        name: base(),
        f"EMA-Nesterov({name})": EMANesterov(base(), gamma=0.9, beta=1.0),
        f"EMA-Nesterov({name}), two buffers": EMANesterov(
            base(), gamma=0.9, beta=1.0, memory_efficient=False
        ),
        f"EMA-Nesterov({name}), fold carried across steps": CarriedFold(base()),
        f"{name} + one pass over p and m (floor)": OnePassFloor(base()),
    }


def measure_step_time(
    steps: int,
    warmup: int = 3,
    widths: tuple[int, ...] = WIDTHS,
    model: str = "mlp",
    transformer: dict | None = None,
    impls: tuple[str, ...] = ("fused", "foreach"),
) -> dict[str, Any]:
    """Median ``step()`` milliseconds and state tensors per parameter, per base implementation.

    ``model`` is ``"mlp"`` (``widths``) or ``"transformer"`` (``transformer``, default
    :data:`TRANSFORMER`); ``impls`` are ``"fused"``/``"foreach"`` AdamW and ``"SGD"``.
    """
    if model == "mlp":
        params_fn = lambda: mlp_params(widths=widths)  # noqa: E731
        shape_info: dict[str, Any] = {"widths": list(widths)}
    else:
        params_fn = lambda: transformer_params(cfg=transformer)  # noqa: E731
        shape_info = {"transformer": transformer or TRANSFORMER}
    probe = params_fn()
    n_params = sum(p.numel() for p in probe)
    out: dict[str, Any] = {"n_params": n_params, "n_tensors": len(probe), **shape_info}
    out["runs"] = {}
    del probe
    for impl in impls:
        opts = _optimizers(impl, params_fn)
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
