"""ENGINE: the endogenous variational multiscale zeroth-order optimizer (V-cycle)."""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from engine_zo._base import (
    Direction,
    ZOOptimizer,
    as_dtype,
    check_int,
    check_noise,
    check_positive,
)
from engine_zo._history import FineHistory
from engine_zo.samplers import LowRankSampler, draw
from methodkit import zo
from methodkit.torch import generator


class Engine(ZOOptimizer):
    r"""ENGINE: multiscale zeroth-order optimization with a V-cycle over noise scales.

    Every step is one central two-point estimate along a direction ``xi``
    (2 forward passes, same batch):

    .. math::
        c = \frac{L(\theta + \epsilon\xi) - L(\theta - \epsilon\xi)}{2\epsilon},\qquad
        \theta \leftarrow (1 - \eta\lambda)\theta - \eta c \xi .

    Levels: level 0 (fine) uses ``xi = z ~ N(0, I_d)``; coarse level ``k`` uses, for each
    2-D weight, ``xi_sub = U V_c^T / sqrt(r_k)`` with ``U`` fresh each step and ``V_c`` fixed
    within a cycle (other tensors: full noise). Fine probes push ``(seed_j, c_j)`` into a ring
    buffer of size ``K``; the fine-scale direction
    ``h = sum_j beta^{age_j} c_j z(seed_j)`` is regenerated, never stored. Coarse steps
    inject it:

    .. math::
        \xi = \sqrt{1-\gamma}\,\xi_{sub} + \sqrt{\gamma}\, a\, \|\xi_{sub}\|\, \hat h,
        \qquad a \sim N(0, 1),\ \hat h = h / \|h\| .

    One V-cycle: ``pre_smooth`` fine steps (lr ``fine_lr``), a new cycle seed (new ``V_c``),
    ``coarse_steps[k]`` steps at rank ``ranks[k]`` for each level, ``post_smooth`` fine steps.
    All noise comes from integer seeds (``methodkit.zo``), so the optimizer state holds only
    ints and floats and peak memory is MeZO's plus one temporary of the largest tensor.
    This algorithm is inferred from the paper's abstract (see the package README).

    Args:
        params: Tensors or param-group dicts (per-group ``lr``, ``eps``, ``weight_decay``,
            ``fine_lr``; ``"embedding": True`` marks groups that ``lowrank_embeddings=False``
            perturbs with full noise; a group with ``lr=0`` is frozen).
        lr: Coarse-step learning rate ``eta`` (> 0).
        eps: Perturbation scale ``epsilon`` (> 0).
        ranks: Coarse ranks ``r_1 > r_2 > ...`` (empty: fine steps only).
        coarse_steps: Steps per coarse level (same length as ``ranks``; ``None``: 8 at
            every level, so ``ranks=()`` alone gives MeZO).
        pre_smooth: Fine steps at the start of a cycle.
        post_smooth: Fine steps at the end of a cycle.
        fine_lr: Learning rate of fine steps (``None``: ``lr``).
        inject: Injection strength ``gamma`` in [0, 1).
        history: Ring-buffer size ``K`` of fine probes.
        history_decay: Age discount ``beta`` in (0, 1].
        weight_decay: Decoupled weight decay ``lambda``.
        noise: ``"gaussian"`` or ``"rademacher"``.
        lowrank_embeddings: If False, groups flagged ``"embedding"`` get full noise.
        seed: Base seed.
        fine_buffer: Keep the fine-scale direction ``h`` as one float32 accumulator per
            tensor (one extra copy of the parameters) instead of regenerating its ``history``
            noise draws in every coarse pass: coarse steps then cost about a MeZO step. Same
            algorithm, different rounding; off by default (no tensor kept, MeZO's memory).

    References:
        "ENGINE: Endogenous Variational MultiScale Zeroth-Order Optimization" (NeurIPS 2026
        submission; algorithm inferred from the abstract). Builds on Malladi et al. (MeZO,
        2023), Chen et al. (LOZO, 2025) and Maheswaranathan et al. (Guided ES, 2019).

    Example:
        >>> model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(),
        ...                             torch.nn.Linear(8, 1))
        >>> opt = Engine(model.parameters(), lr=1e-3, eps=1e-3, ranks=(2,))
        >>> x, y = torch.randn(32, 8), torch.randn(32, 1)
        >>> for _ in range(20):
        ...     loss = opt.step(lambda: torch.nn.functional.mse_loss(model(x), y))
        >>> opt.forward_passes
        40
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-6,
        eps: float = 1e-3,
        ranks: Sequence[int] = (4,),
        coarse_steps: Sequence[int] | None = None,
        pre_smooth: int = 1,
        post_smooth: int = 1,
        fine_lr: float | None = None,
        inject: float = 0.5,
        history: int = 8,
        history_decay: float = 1.0,
        weight_decay: float = 0.0,
        noise: str = "gaussian",
        lowrank_embeddings: bool = True,
        seed: int = 0,
        fine_buffer: bool = False,
    ) -> None:
        ranks = tuple(ranks)
        coarse_steps = (8,) * len(ranks) if coarse_steps is None else tuple(coarse_steps)
        for r in ranks:
            check_int("ranks[k]", r, 1)
        for nu in coarse_steps:
            check_int("coarse_steps[k]", nu, 1)
        if len(ranks) != len(coarse_steps):
            raise ValueError(
                f"ranks and coarse_steps must have the same length, got {len(ranks)} and "
                f"{len(coarse_steps)}"
            )
        if any(a <= b for a, b in itertools.pairwise(ranks)):
            raise ValueError(f"ranks must be strictly decreasing, got {ranks}")
        check_int("pre_smooth", pre_smooth, 0)
        check_int("post_smooth", post_smooth, 0)
        if pre_smooth + post_smooth + sum(coarse_steps) == 0:
            raise ValueError("a V-cycle needs at least one step (all step counts are 0)")
        if not (isinstance(inject, int | float) and 0.0 <= inject < 1.0):
            raise ValueError(f"inject must be in [0, 1), got {inject}")
        check_int("history", history, 0)
        if inject > 0 and history < 1:
            raise ValueError(f"history must be >= 1 when inject > 0, got {history}")
        if not isinstance(fine_buffer, bool):
            raise TypeError(f"fine_buffer must be a bool, got {type(fine_buffer).__name__}")
        if not 0.0 < history_decay <= 1.0:
            raise ValueError(f"history_decay must be in (0, 1], got {history_decay}")
        if fine_lr is not None:
            check_positive("fine_lr", fine_lr, allow_zero=True)
        check_noise(noise)
        defaults = {"lr": lr, "eps": eps, "weight_decay": weight_decay, "fine_lr": fine_lr}
        super().__init__(params, defaults, seed)
        self.ranks, self.coarse_steps = ranks, coarse_steps
        self.pre_smooth, self.post_smooth = pre_smooth, post_smooth
        self.inject, self.history, self.history_decay = float(inject), history, history_decay
        self.noise, self.lowrank_embeddings = noise, lowrank_embeddings
        self._schedule = (
            [0] * pre_smooth
            + [k + 1 for k, nu in enumerate(coarse_steps) for _ in range(nu)]
            + [0] * post_smooth
        )
        self.fine_buffer = fine_buffer
        # h is only ever used by injecting coarse steps: no accumulator otherwise
        buffered = fine_buffer and self.inject > 0 and bool(ranks)
        self._history = FineHistory(history, history_decay, noise, buffered)
        self._phase: tuple[tuple[int, int], LowRankSampler] | None = None
        self._warn_if_no_lowrank()

    # ------------------------------------------------------------------ schedule
    @property
    def cycle_length(self) -> int:
        """Steps per V-cycle."""
        return len(self._schedule)

    @property
    def cycle(self) -> int:
        """Index of the V-cycle the next step belongs to."""
        return self._zo_step // self.cycle_length

    @property
    def level(self) -> int:
        """Level of the next step: 0 = fine (full space), k >= 1 = coarse level k."""
        return self._schedule[self._zo_step % self.cycle_length]

    def _full_noise_params(self) -> list[torch.Tensor]:
        if self.lowrank_embeddings:
            return []
        return [p for g in self.param_groups if g.get("embedding") for p in g["params"]]

    def _sampler(self, level: int) -> LowRankSampler:
        """The coarse sampler of ``level`` in this cycle (kept for the cycle: cached ``V_c``)."""
        key = (level, self.cycle)
        if self._phase is None or self._phase[0] != key:
            self._phase = (key, self._new_sampler(level))
        return self._phase[1]

    def _new_sampler(self, level: int) -> LowRankSampler:
        basis = zo.derive_seed(self.seed, level, self.cycle)
        return LowRankSampler(
            self.ranks[level - 1],
            basis,
            ((i, p) for i, _, p in self._entries()),
            self.noise,
            full=self._full_noise_params(),
        )

    def _warn_if_no_lowrank(self) -> None:
        if not self.ranks or not sum(self.coarse_steps):
            return
        for level in range(1, len(self.ranks) + 1):
            sampler = self._new_sampler(level)
            if not any(sampler.is_lowrank(p) for _, _, p in self._entries()):
                warnings.warn(
                    f"rank {self.ranks[level - 1]} is >= min(m, n) of every matrix parameter "
                    "(or there is none): coarse level "
                    f"{level} falls back to full-space noise for every tensor",
                    UserWarning,
                    stacklevel=3,
                )

    # ------------------------------------------------------------------ directions
    def _fine_direction(self, seed: int) -> Direction:
        def direction(index: int, p: torch.Tensor) -> torch.Tensor:
            return zo.sample(p, zo.tensor_generator(seed, index, p.device), self.noise)

        return direction

    def _eps_entries(self) -> list[tuple[int, float, torch.Tensor]]:
        return [(i, g["eps"], p) for i, g, p in self._entries()]

    @torch.no_grad()
    def fine_direction_norm(self) -> float:
        """``||h||`` of the current ring buffer (streamed over tensors; cached)."""
        self._history.flush()
        return self._history.norm(self._eps_entries())

    def _coarse_direction(self, seed: int, level: int) -> Direction:
        """``xi = sqrt(1-g) xi_sub + sqrt(g) a ||xi_sub|| h / ||h||``, one tensor at a time.

        The step's left factors ``U`` are drawn once (``m x r`` each) and ``||xi_sub||`` comes
        from the factors: ``||U V^T||^2 = sum((U^T U) * (V^T V))``; only full-noise tensors
        (biases, ...) are drawn for it.
        """
        sampler = self._sampler(level)
        scale = math.sqrt(sampler.rank)
        entries = list(self._entries())
        factors = {
            i: sampler.factor(p, zo.tensor_generator(seed, i, p.device))
            for i, _, p in entries
            if sampler.is_lowrank(p)
        }

        small: dict[int, torch.Tensor] = {}  # the step's draws of 1-D tensors (biases, norms)

        def full(index: int, p: torch.Tensor) -> torch.Tensor:
            if index in small:
                return small[index].clone()
            z = draw(tuple(p.shape), zo.tensor_generator(seed, index, p.device), p, self.noise)
            if p.dim() < 2:
                small[index] = z.clone()
            return z

        def sub(index: int, p: torch.Tensor) -> torch.Tensor:
            if index in factors:
                return (factors[index] @ sampler.basis(p).T).div_(scale)
            return full(index, p)

        h_norm = self.fine_direction_norm() if self.inject > 0 and self._history.entries else 0.0
        if h_norm == 0.0 or not math.isfinite(h_norm):
            return sub
        sub_sq = 0.0
        for i, _, p in entries:
            if i in factors:
                U = factors[i].double()
                sub_sq += float(((U.T @ U) * sampler.basis_gram(p)).sum()) / sampler.rank
            else:
                sub_sq += float(torch.linalg.vector_norm(full(i, p).double()) ** 2)
        gen = generator(seed, 7)  # the injection coefficient's own stream
        a = float(torch.randn((), generator=gen, dtype=torch.float64))
        w = math.sqrt(self.inject) * a * math.sqrt(sub_sq) / h_norm
        keep = math.sqrt(1.0 - self.inject)
        eps_of = {i: g["eps"] for i, g, _ in entries}

        def direction(index: int, p: torch.Tensor) -> torch.Tensor:
            h = self._history.tensor(index, p, eps_of[index])
            if index in factors:
                U, V = as_dtype(factors[index], h.dtype), as_dtype(sampler.basis(p), h.dtype)
                return torch.addmm(h, U, V.T, beta=w, alpha=keep / scale)
            return torch.mul(h, w).add_(as_dtype(full(index, p), h.dtype), alpha=keep)

        return direction

    # ------------------------------------------------------------------ step
    def _zo_step_impl(self, closure: Callable[[], Any]) -> float:
        level = self.level
        seed = self._step_seed()
        if level == 0:
            direction = self._fine_direction(seed)
        else:
            direction = self._coarse_direction(seed, level)
        f_plus, f_minus = self._probe(closure, direction)
        half = (f_plus - f_minus) / 2
        if level > 0:
            self._restore_and_update(direction, half)
            return (f_plus + f_minus) / 2
        history = self._history

        def absorb(index: int, group: dict[str, Any], p: torch.Tensor, z: torch.Tensor) -> None:
            history.absorb(index, p, group["eps"], z, half)  # h <- beta h + c z, same draw

        hook = absorb if history.buffered and history.size > 0 else None
        self._restore_and_update(direction, half, lr_key="fine_lr", on_direction=hook)
        history.push(seed, half)
        return (f_plus + f_minus) / 2

    def _extra_state(self) -> dict[str, Any]:
        return {
            "buffer_seeds": [s for s, _ in self._history.entries],
            "buffer_half_diffs": [d for _, d in self._history.entries],
        }

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        seeds = [int(s) for s in state.get("buffer_seeds", [])]
        diffs = [float(d) for d in state.get("buffer_half_diffs", [])]
        self._history.load(zip(seeds, diffs, strict=True))
