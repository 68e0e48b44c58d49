"""Convex diagonal quadratics: accelerated iteration counts and the noisy loss floor.

Benchmark code (``bench/``), not part of the ema-nesterov wheel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ema_nesterov import EMANesterov
from methodkit.torch import generator

#: The spec's lookahead grid {0, 0.02, ..., 0.98, 0.99, 0.995}.
BETA_GRID: tuple[float, ...] = (*(round(0.02 * i, 2) for i in range(50)), 0.99, 0.995)


def diagonal_quadratic(
    kappa: float, d: int = 100, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """Eigenvalues of ``f(x) = 1/2 sum_i lambda_i x_i^2``: ``d`` values log-spaced in [1/kappa, 1].

    Raises:
        ValueError: If ``kappa < 1`` or ``d < 2``.
    """
    if not math.isfinite(kappa) or kappa < 1:
        raise ValueError(f"kappa must be a finite number >= 1, got {kappa}")
    if d < 2:
        raise ValueError(f"d must be >= 2, got {d}")
    return torch.logspace(-math.log10(kappa), 0.0, d, dtype=dtype)


def _loss(lam: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return 0.5 * (lam * x * x).sum(-1)


@dataclass(frozen=True)
class IterationResult:
    """Fewest iterations to reach the tolerance over a grid, and the grid value achieving it."""

    iterations: int
    best: float
    converged: bool


def iterations_to_tolerance(
    kappa: float,
    gamma: float | None,
    betas: Sequence[float] = BETA_GRID,
    *,
    method: str = "ema",
    d: int = 100,
    lr: float = 1.0,
    tol: float = 1e-6,
    max_iter: int = 50_000,
) -> IterationResult:
    """Iterations until ``f(theta_t) <= tol * f(x0)`` from ``x0 = 1``, best over ``betas``.

    Every grid value runs at once as its own parameter group of one :class:`EMANesterov`
    around ``torch.optim.SGD(lr)`` (the gradient is taken at the lookahead point the
    parameters hold); the first iteration at which any group reaches the tolerance is the
    minimum over the grid.

    Args:
        kappa: Condition number of the quadratic.
        gamma: EMA decay; ignored for ``method="gd"`` and ``"sgd_nesterov"``.
        betas: Lookahead grid (momentum grid for ``"sgd_nesterov"``).
        method: ``"ema"`` (EMA-Nesterov, gamma 0 is Nesterov), ``"gd"`` (plain gradient
            descent) or ``"sgd_nesterov"`` (``torch.optim.SGD(nesterov=True)``, the loss read
            at the parameters).
        d: Dimension.
        lr: Base learning rate (1 = 1/L).
        tol: Relative tolerance on the loss.
        max_iter: Give up after this many iterations (``converged=False``).

    Returns:
        The iteration count and the grid value reaching the tolerance first.

    Raises:
        ValueError: For an unknown ``method`` or an empty grid.
    """
    if method not in ("ema", "gd", "sgd_nesterov"):
        raise ValueError(f"method must be 'ema', 'gd' or 'sgd_nesterov', got {method!r}")
    grid = [0.0] if method == "gd" else [float(b) for b in betas]
    if not grid:
        raise ValueError("betas must not be empty")
    lam = diagonal_quadratic(kappa, d)
    params = [torch.nn.Parameter(torch.ones(d, dtype=torch.float64)) for _ in grid]
    f0 = float(_loss(lam, params[0].detach()))
    if method == "sgd_nesterov":
        opt: torch.optim.Optimizer = torch.optim.SGD(
            [
                {"params": [p], "momentum": b, "nesterov": b > 0}
                for p, b in zip(params, grid, strict=True)
            ],
            lr=lr,
        )
    else:
        base = torch.optim.SGD([{"params": [p]} for p in params], lr=lr)
        opt = EMANesterov(base, gamma=gamma if method == "ema" else 0.0, beta=0.0)
        for group, b in zip(opt.param_groups, grid, strict=True):
            group["ema_beta"] = b
        opt.sync_lookahead()
    for it in range(1, max_iter + 1):
        for p in params:
            p.grad = lam * p.detach()
        opt.step()
        with torch.no_grad():
            if isinstance(opt, EMANesterov):
                x = torch.stack(
                    [
                        p - g["_ema_beta_applied"] * opt.state[p]["m"]
                        for g in opt.param_groups
                        for p in g["params"]
                    ]
                )
            else:
                x = torch.stack([p.detach() for p in params])
            ratio = _loss(lam, x) / f0
        hit = (ratio <= tol).nonzero()
        if hit.numel():
            return IterationResult(it, grid[int(hit[0, 0])], True)
    return IterationResult(max_iter, float("nan"), False)


def noisy_quadratic_floor(
    gamma: float,
    beta: float = 0.9,
    *,
    kappa: float = 1e3,
    lr: float = 0.5,
    noise_std: float = 0.05,
    steps: int = 4000,
    tail: int = 1000,
    seeds: Sequence[int] = (0, 1, 2),
    d: int = 100,
) -> list[float]:
    """Stationary loss floor of EMA-Nesterov(SGD) under additive Gaussian gradient noise.

    The gradient at the lookahead point is ``lambda * y + noise_std * xi`` with
    ``xi ~ N(0, I)``; the floor is the mean of ``f(theta_t)`` over the last ``tail`` steps.

    Returns:
        One floor per seed.

    Raises:
        ValueError: If ``tail`` is not in ``[1, steps]`` or ``noise_std < 0``.
    """
    if not 1 <= tail <= steps:
        raise ValueError(f"tail must be in [1, steps={steps}], got {tail}")
    if noise_std < 0:
        raise ValueError(f"noise_std must be >= 0, got {noise_std}")
    lam = diagonal_quadratic(kappa, d)
    floors = []
    for seed in seeds:
        gen = generator(int(seed))
        p = torch.nn.Parameter(torch.ones(d, dtype=torch.float64))
        opt = EMANesterov(torch.optim.SGD([p], lr=lr), gamma=gamma, beta=beta)
        total = 0.0
        for t in range(steps):
            noise = torch.randn(d, generator=gen, dtype=torch.float64)
            p.grad = lam * p.detach() + noise_std * noise
            opt.step()
            if t >= steps - tail:
                theta = p.detach() - opt.param_groups[0]["_ema_beta_applied"] * opt.state[p]["m"]
                total += float(_loss(lam, theta))
        floors.append(total / tail)
    return floors
