"""Zeroth-order baselines sharing ENGINE's closure contract: MeZO, LOZO, SubZero, HiZOO, ZO-Adam.

All are ``torch.optim.Optimizer`` subclasses whose ``step(closure)`` calls the closure with
gradients disabled, count the calls in ``forward_passes`` and regenerate their noise from
integer seeds through ``methodkit.zo``. MeZO, LOZO (momentum 0) and SubZero keep no tensor
state; HiZOO keeps one and ZO-Adam two parameter-sized tensors per parameter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from engine_zo._base import (
    Direction,
    ZOOptimizer,
    check_int,
    check_noise,
    check_positive,
)
from engine_zo.samplers import LowRankSampler, SubspaceSampler, draw
from methodkit import zo


def _fine(seed: int, kind: str) -> Direction:
    def direction(index: int, p: torch.Tensor) -> torch.Tensor:
        return zo.sample(p, zo.tensor_generator(seed, index, p.device), kind)

    return direction


def _structured(seed: int, sampler: zo.Sampler) -> Direction:
    def direction(index: int, p: torch.Tensor) -> torch.Tensor:
        return zo.sample(p, zo.tensor_generator(seed, index, p.device), sampler=sampler)

    return direction


class MeZO(ZOOptimizer):
    r"""MeZO / ZO-SGD (Malladi et al., 2023): in-place SPSA with seeded Gaussian noise.

    .. math::
        c = \frac{L(\theta + \epsilon z) - L(\theta - \epsilon z)}{2\epsilon},\quad
        \theta \leftarrow (1 - \eta\lambda)\theta - \eta c z,\quad z \sim N(0, I_d)

    with ``z`` regenerated from the step seed (never stored). 2 forward passes per step.

    Args:
        params: Iterable of tensors or param-group dicts (per-group ``lr``, ``eps``,
            ``weight_decay``; a group with ``lr=0`` is frozen).
        lr: Learning rate (> 0).
        eps: Perturbation scale (> 0).
        weight_decay: Decoupled weight decay (>= 0).
        noise: ``"gaussian"`` or ``"rademacher"``.
        seed: Base seed of the per-step seeds.

    References:
        Malladi et al., "Fine-Tuning Language Models with Just Forward Passes", NeurIPS 2023.

    Example:
        >>> model = torch.nn.Linear(4, 1)
        >>> opt = MeZO(model.parameters(), lr=1e-3)
        >>> x = torch.randn(16, 4)
        >>> loss = opt.step(lambda: model(x).pow(2).mean())
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-6,
        eps: float = 1e-3,
        weight_decay: float = 0.0,
        noise: str = "gaussian",
        seed: int = 0,
    ) -> None:
        check_noise(noise)
        super().__init__(params, {"lr": lr, "eps": eps, "weight_decay": weight_decay}, seed)
        self.noise = noise

    def _zo_step_impl(self, closure: Callable[[], Any]) -> float:
        direction = _fine(self._step_seed(), self.noise)
        f_plus, f_minus = self._probe(closure, direction)
        self._restore_and_update(direction, (f_plus - f_minus) / 2)
        return (f_plus + f_minus) / 2


class LOZO(ZOOptimizer):
    r"""LOZO (Chen et al., 2024): low-rank ZO with a lazily refreshed right factor.

    Each 2-D weight ``W`` (m x n, ``min(m, n) > rank``) is perturbed by
    ``xi = U V^T / sqrt(r)`` with ``U`` fresh each step and ``V`` redrawn every
    ``lazy_interval`` steps; other tensors get full Gaussian noise. Update
    ``theta <- theta - lr c xi`` (the paper's ``1/r`` update scale with ``eps`` rescaled by
    ``sqrt(r)``). With ``momentum > 0`` (LOZO-M) the low-rank factor ``c U`` is averaged,
    ``N <- beta N + (1 - beta) c U`` (full tensors: ``beta M + (1 - beta) c z``), and ``N`` is
    carried to a new ``V`` by ``N <- N V_old^T V_new / n``; this keeps one small tensor per
    parameter.

    References:
        Chen et al., "Enhancing Zeroth-order Fine-tuning for Language Models with Low-rank
        Structures", ICLR 2025.

    Example:
        >>> model = torch.nn.Linear(8, 6)
        >>> opt = LOZO(model.parameters(), lr=1e-3, rank=2)
        >>> loss = opt.step(lambda: model(torch.ones(3, 8)).sum())
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-6,
        eps: float = 1e-3,
        rank: int = 4,
        lazy_interval: int = 50,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        noise: str = "gaussian",
        seed: int = 0,
    ) -> None:
        check_int("rank", rank, 1)
        check_int("lazy_interval", lazy_interval, 1)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        check_noise(noise)
        super().__init__(params, {"lr": lr, "eps": eps, "weight_decay": weight_decay}, seed)
        self.rank, self.lazy_interval, self.momentum, self.noise = (
            rank,
            lazy_interval,
            momentum,
            noise,
        )
        self._block_sampler: tuple[int, LowRankSampler] | None = None

    def _sampler(self, block: int) -> LowRankSampler:
        """The block's sampler, kept while the block lasts (its ``V`` factors are cached)."""
        cached = self._block_sampler
        if cached is None or cached[0] != block:
            seed = zo.derive_seed(self.seed, 1, block)
            params = ((i, p) for i, _, p in self._entries())
            cached = (block, LowRankSampler(self.rank, seed, params, self.noise))
            self._block_sampler = cached
        return cached[1]

    def _zo_step_impl(self, closure: Callable[[], Any]) -> float:
        block = self._zo_step // self.lazy_interval
        sampler = self._sampler(block)
        step_seed = self._step_seed()
        direction = _structured(step_seed, sampler)
        f_plus, f_minus = self._probe(closure, direction)
        half = (f_plus - f_minus) / 2
        if self.momentum == 0.0:
            self._restore_and_update(direction, half)
        else:
            self._restore(direction)  # bitwise back to theta
            self._momentum_update(sampler, step_seed, half, block)
        return (f_plus + f_minus) / 2

    @torch.no_grad()
    def _momentum_update(
        self, sampler: LowRankSampler, step_seed: int, half: float, block: int
    ) -> None:
        beta = self.momentum
        for index, group, p in self._entries():
            c = half / group["eps"]
            gen = zo.tensor_generator(step_seed, index, p.device)
            state = self.state[p]
            if sampler.is_lowrank(p):
                n = p.shape[1]
                U = sampler.factor(p, gen)
                V = sampler.basis(p)
                buf = state.get("momentum")
                if buf is not None and state.get("block") != block:
                    old = zo.derive_seed(self.seed, 1, state["block"])
                    V_old = draw(
                        (n, self.rank), zo.tensor_generator(old, index, p.device), p, self.noise
                    )
                    buf = buf @ (V_old.T @ V) / n
                buf = (1 - beta) * c * U if buf is None else beta * buf + (1 - beta) * c * U
                state["momentum"], state["block"] = buf, block
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(buf @ V.T, alpha=-group["lr"] / math.sqrt(self.rank))
            else:
                z = sampler(p, gen)
                buf = state.get("momentum")
                buf = (1 - beta) * c * z if buf is None else beta * buf + (1 - beta) * c * z
                state["momentum"] = buf
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(buf, alpha=-group["lr"])


class SubZero(ZOOptimizer):
    r"""SubZero (Yu et al., 2024): random-subspace ZO with orthonormal projections.

    Each 2-D weight is perturbed by ``xi = sqrt(mn)/r * U S V^T``; ``U``, ``V`` orthonormal
    from a QR of seeded Gaussians, refreshed every ``refresh_interval`` steps; ``S ~ N(0,
    1)^{r x r}`` fresh each step. Other tensors get full Gaussian noise. Update
    ``theta <- theta - lr c xi``. (The ``sqrt(mn)/r`` factor is ours: it makes the estimate
    unbiased over bases, so the lr grid is shared with MeZO.)

    References:
        Yu et al., "SubZero: Random Subspace Zeroth-Order Optimization for Memory-Efficient
        LLM Fine-Tuning", 2024.

    Example:
        >>> model = torch.nn.Linear(8, 6)
        >>> opt = SubZero(model.parameters(), lr=1e-3, rank=2)
        >>> loss = opt.step(lambda: model(torch.ones(3, 8)).sum())
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-6,
        eps: float = 1e-3,
        rank: int = 4,
        refresh_interval: int = 100,
        weight_decay: float = 0.0,
        seed: int = 0,
    ) -> None:
        check_int("rank", rank, 1)
        check_int("refresh_interval", refresh_interval, 1)
        super().__init__(params, {"lr": lr, "eps": eps, "weight_decay": weight_decay}, seed)
        self.rank, self.refresh_interval = rank, refresh_interval
        self._block_sampler: tuple[int, SubspaceSampler] | None = None

    def _zo_step_impl(self, closure: Callable[[], Any]) -> float:
        block = self._zo_step // self.refresh_interval
        cached = self._block_sampler
        if cached is None or cached[0] != block:  # one sampler (cached QR bases) per block
            basis = zo.derive_seed(self.seed, 2, block)
            params = ((i, p) for i, _, p in self._entries())
            cached = (block, SubspaceSampler(self.rank, basis, params))
            self._block_sampler = cached
        sampler = cached[1]
        direction = _structured(self._step_seed(), sampler)
        f_plus, f_minus = self._probe(closure, direction)
        self._restore_and_update(direction, (f_plus - f_minus) / 2)
        return (f_plus + f_minus) / 2


class HiZOO(ZOOptimizer):
    r"""HiZOO (Zhao et al., 2024): diagonal-Hessian-informed ZO. Extra parameter-sized state.

    With a diagonal curvature estimate ``D`` (``Sigma = D^{-1}``, initialised to ones):

    .. math::
        \ell_0 = L(\theta),\ \ell_\pm = L(\theta \pm \epsilon D^{-1/2} z) \\
        D \leftarrow (1 - \alpha) D + \alpha \frac{|\ell_+ + \ell_- - 2\ell_0|}{2\epsilon^2}
            D z^2 \\
        \theta \leftarrow (1 - \eta\lambda)\theta - \eta
            \frac{\ell_+ - \ell_-}{2\epsilon} D^{-1/2} z

    (the step uses the updated ``D``). 3 forward passes per step; ``step`` returns ``l0``.

    References:
        Zhao et al., "Second-Order Fine-Tuning without Pain for LLMs: A Hessian Informed
        Zeroth-Order Optimizer", ICLR 2025.

    Example:
        >>> model = torch.nn.Linear(4, 1)
        >>> opt = HiZOO(model.parameters(), lr=1e-3)
        >>> loss = opt.step(lambda: model(torch.ones(2, 4)).pow(2).mean())
    """

    forwards_per_step = 3

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-6,
        eps: float = 1e-3,
        hessian_smooth: float = 1e-6,
        weight_decay: float = 0.0,
        seed: int = 0,
    ) -> None:
        if not 0.0 <= hessian_smooth <= 1.0:
            raise ValueError(f"hessian_smooth must be in [0, 1], got {hessian_smooth}")
        super().__init__(params, {"lr": lr, "eps": eps, "weight_decay": weight_decay}, seed)
        self.hessian_smooth = hessian_smooth

    def _diag(self, p: torch.Tensor) -> torch.Tensor:
        state = self.state[p]
        if "hessian" not in state:
            state["hessian"] = torch.ones_like(p)
        return state["hessian"]

    def _zo_step_impl(self, closure: Callable[[], Any]) -> float:
        seed = self._step_seed()

        def direction(index: int, p: torch.Tensor) -> torch.Tensor:
            z = zo.sample(p, zo.tensor_generator(seed, index, p.device))
            return z.mul_(self._diag(p).rsqrt())

        l0 = self._call(closure)
        f_plus, f_minus = self._probe(closure, direction)
        self._restore(direction)  # bitwise, with the old D
        alpha = self.hessian_smooth
        curv = abs(f_plus + f_minus - 2 * l0)
        with torch.no_grad():
            for index, group, p in self._entries():
                z = zo.sample(p, zo.tensor_generator(seed, index, p.device))
                D = self._diag(p)
                Dz2 = D * z * z  # uses the old D
                D.mul_(1 - alpha).add_(Dz2, alpha=alpha * curv / (2 * group["eps"] ** 2))
        self._apply(
            direction,
            lambda g: -g["lr"] * (f_plus - f_minus) / (2 * g["eps"]),
            lambda g: 1.0 - g["lr"] * g["weight_decay"],
        )
        return l0


class ZOAdam(ZOOptimizer):
    r"""ZO-Adam: the MeZO estimate ``g = c z`` fed to Adam moments. Extra 2x parameter state.

    .. math::
        m \leftarrow \beta_1 m + (1-\beta_1) g,\ v \leftarrow \beta_2 v + (1-\beta_2) g^2,\
        \theta \leftarrow (1-\eta\lambda)\theta - \eta \hat m / (\sqrt{\hat v} + \delta)

    References:
        Zhang et al., "Revisiting Zeroth-Order Optimization for Memory-Efficient LLM
        Fine-Tuning: A Benchmark", ICML 2024.

    Example:
        >>> model = torch.nn.Linear(4, 1)
        >>> opt = ZOAdam(model.parameters(), lr=1e-3)
        >>> loss = opt.step(lambda: model(torch.ones(2, 4)).pow(2).mean())
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-4,
        eps: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        adam_eps: float = 1e-8,
        weight_decay: float = 0.0,
        seed: int = 0,
    ) -> None:
        if not all(0.0 <= b < 1.0 for b in betas) or len(betas) != 2:
            raise ValueError(f"betas must be two floats in [0, 1), got {betas}")
        check_positive("adam_eps", adam_eps)
        super().__init__(params, {"lr": lr, "eps": eps, "weight_decay": weight_decay}, seed)
        self.betas, self.adam_eps = betas, adam_eps

    def _zo_step_impl(self, closure: Callable[[], Any]) -> float:
        direction = _fine(self._step_seed(), "gaussian")
        f_plus, f_minus = self._probe(closure, direction)
        self._restore(direction)  # bitwise back to theta
        b1, b2 = self.betas
        t = self._zo_step + 1
        with torch.no_grad():
            for index, group, p in self._entries():
                g = direction(index, p).mul_((f_plus - f_minus) / (2 * group["eps"]))
                state = self.state[p]
                if "exp_avg" not in state:
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (v / (1 - b2**t)).sqrt_().add_(self.adam_eps)
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.addcdiv_(m, denom, value=-group["lr"] / (1 - b1**t))
        return (f_plus + f_minus) / 2
