"""Echo statistics accumulated in chunks of steps, as one batched call per chunk.

Per-step statistics (``s s^T`` outer products, one-step vector-Jacobian products) are small
matrix products with a Python call each; stacking ``size`` steps into one ``(size * R, n)``
batch turns them into a few large matrix products. Memory stays independent of ``T``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

__all__ = ["CHUNK", "StatChunks"]

CHUNK = 64  # steps per batched statistic call

StatFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], tuple[torch.Tensor, ...]]


class StatChunks:
    """Buffer ``(phi_half, u, weight)`` of up to ``size`` steps; sum ``stat_fn`` over chunks.

    ``stat_fn(phi_half, u, weight)`` receives stacked ``(k, R, n)``, ``(k, R, m)`` and
    ``(k, R, ...)`` tensors (``None`` when no weights were pushed) and returns one summed
    tensor per parameter.
    """

    def __init__(self, stat_fn: StatFn, size: int = CHUNK) -> None:
        self.stat_fn = stat_fn
        self.size = size
        self._buf: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]] = []
        self.total: list[torch.Tensor] | None = None

    def push(self, phi_half: torch.Tensor, u: torch.Tensor, weight: torch.Tensor | None) -> None:
        """Add one step; computes the chunk's statistic when the buffer is full."""
        self._buf.append((phi_half, u, weight))
        if len(self._buf) == self.size:
            self.flush()

    def flush(self) -> None:
        """Compute the statistic of the buffered steps and add it to :attr:`total`."""
        if not self._buf:
            return
        phs = [b[0] for b in self._buf]
        us = [b[1] for b in self._buf]
        ws = [b[2] for b in self._buf]
        self._buf.clear()
        w = None if any(x is None for x in ws) else torch.stack([x for x in ws if x is not None])
        new = self.stat_fn(torch.stack(phs), torch.stack(us), w)
        if self.total is None:
            self.total = [n.clone() for n in new]
        else:
            for a, n in zip(self.total, new, strict=True):
                a.add_(n)

    def result(self) -> list[torch.Tensor]:
        """The summed statistic over all pushed steps."""
        self.flush()
        if self.total is None:  # pragma: no cover - T >= 1 always pushes a step
            raise RuntimeError("no step was pushed")
        return self.total
