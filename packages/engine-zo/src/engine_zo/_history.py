"""ENGINE's fine-scale memory: the ring buffer of fine probes and the direction it defines.

Every fine probe ``j`` leaves ``(seed_j, d_j)`` (``d_j`` the half-difference of its two
losses). The fine-scale direction of a tensor with perturbation scale ``eps`` is

    h = sum_j beta^{age_j} (d_j / eps) z_j(seed_j),

regenerated from the seeds by default (K noise draws per tensor each time it is needed, no
tensor kept). With ``buffered=True`` one accumulator per tensor holds ``h`` instead: a new
probe is folded in from the noise its own update pass already drew, and a term that leaves
the ring is subtracted later (``flush``, at the next coarse step), so no step regenerates all
K draws. The buffer costs one float32 copy of the parameters and changes only the rounding.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from methodkit import zo


def accumulator_dtype(p: torch.Tensor) -> torch.dtype:
    """float64 for float64 parameters, else float32 (low-precision sums lose no terms)."""
    return torch.float64 if p.dtype == torch.float64 else torch.float32


class FineHistory:
    """Ring buffer of ``(seed, half-difference)`` fine probes and the direction ``h``.

    Args:
        size: Ring size ``K`` (0: nothing is kept).
        decay: Age discount ``beta`` in (0, 1].
        noise: Noise kind of the fine probes.
        buffered: Keep ``h`` as one accumulator per tensor (see the module docstring).
    """

    def __init__(self, size: int, decay: float, noise: str, buffered: bool = False) -> None:
        self.size, self.decay, self.noise, self.buffered = size, decay, noise, buffered
        self.entries: list[tuple[int, float]] = []  # oldest first
        self._norm: float | None = None
        self._h: dict[int, torch.Tensor] = {}
        # Terms still inside every accumulator of ``_h`` but no longer in the ring:
        # (seed, current coefficient), subtracted by ``flush``.
        self._pending: list[tuple[int, float]] = []
        self._absorbed: set[int] = set()
        self._like: dict[int, tuple[torch.Tensor, float]] = {}  # index -> (param, eps)

    def terms(self) -> list[tuple[int, float]]:
        """``(seed_j, beta^age_j d_j)``, oldest first (divide by a tensor's eps for ``c_j``)."""
        n = len(self.entries)
        return [(s, self.decay ** (n - 1 - j) * d) for j, (s, d) in enumerate(self.entries)]

    def load(self, entries: Iterable[tuple[int, float]]) -> None:
        """Replace the ring (``load_state_dict``); accumulators are rebuilt on demand."""
        self.entries = list(entries)
        self._h, self._pending, self._norm, self._like = {}, [], None, {}

    # ------------------------------------------------------------------ regeneration
    def _build(self, index: int, p: torch.Tensor, eps: float) -> torch.Tensor:
        dtype = accumulator_dtype(p)
        acc: torch.Tensor | None = None
        for s, coef in [*self._pending, *self.terms()]:
            z = zo.sample(p, zo.tensor_generator(s, index, p.device), self.noise)
            if acc is None:  # the first term in place of ``0 + coef z``: the same bits
                acc = z.to(dtype).mul_(coef / eps)
            else:
                acc.add_(z.to(dtype), alpha=coef / eps)
            del z
        if acc is None:
            return torch.zeros(p.shape, dtype=dtype, device=p.device)
        return acc

    def tensor(self, index: int, p: torch.Tensor, eps: float) -> torch.Tensor:
        """``h`` of one tensor (accumulator dtype). Buffered: the stored tensor, read only."""
        if not self.buffered:
            return self._build(index, p, eps)
        if index not in self._h:
            self._h[index] = self._build(index, p, eps)
            self._like[index] = (p, eps)
        return self._h[index]

    def flush(self) -> None:
        """Subtract the terms that left the ring from every accumulator (buffered mode)."""
        if not self._pending:
            return
        for index, acc in self._h.items():
            p, eps = self._like[index]
            for s, coef in self._pending:
                z = zo.sample(p, zo.tensor_generator(s, index, p.device), self.noise)
                acc.sub_(z.to(acc.dtype), alpha=coef / eps)
                del z
        self._pending, self._norm = [], None

    def norm(self, entries: Iterable[tuple[int, float, torch.Tensor]]) -> float:
        """``||h||`` over ``(index, eps, param)`` (streamed over tensors; cached)."""
        if self._norm is None:
            total = 0.0
            for index, eps, p in entries:
                total += float(torch.linalg.vector_norm(self.tensor(index, p, eps)) ** 2)
            self._norm = math.sqrt(total)
        return self._norm

    # ------------------------------------------------------------------ new probes
    def absorb(self, index: int, p: torch.Tensor, eps: float, z: torch.Tensor, half: float) -> None:
        """Buffered mode, during a fine update pass: ``h <- beta h + (half / eps) z``."""
        acc = self.tensor(index, p, eps)
        if self.decay != 1.0:
            acc.mul_(self.decay)
        acc.add_(z.to(acc.dtype), alpha=half / eps)
        self._absorbed.add(index)

    def push(self, seed: int, half: float) -> None:
        """Add a fine probe to the ring (after its update pass absorbed it, if buffered)."""
        if self.size == 0:
            return
        if self.buffered:
            for index in set(self._h) - self._absorbed:
                del self._h[index], self._like[index]  # frozen since: rebuilt on demand
            self._absorbed = set()
            self._pending = [(s, self.decay * c) for s, c in self._pending]
        self.entries.append((seed, half))
        if len(self.entries) > self.size:
            s_old, d_old = self.entries.pop(0)
            if self.buffered and self._h:
                self._pending.append((s_old, self.decay**self.size * d_old))
        self._norm = None
