"""Compressors for Distributed Shifted Compression: unbiased rand-k and stochastic quantisation.

A compressor ``C`` maps a vector to a (random) vector that is cheaper to send. DSC needs it
unbiased with bounded variance, ``E C(v) = v`` and ``E||C(v) - v||^2 <= omega ||v||^2``;
top-k is biased and is shipped only as a baseline.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import torch

BYTES_PER_VALUE = 4  # float32 on the wire


def _check_ratio(ratio: float) -> float:
    if isinstance(ratio, bool) or not isinstance(ratio, int | float):
        raise TypeError(f"ratio must be a float in (0, 1], got {ratio!r}")
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"compression ratio must be in (0, 1], got {ratio}")
    return float(ratio)


class Compressor(ABC):
    """Abstract compressor: ``c = compressor(v, generator)``.

    Attributes:
        unbiased: Whether ``E C(v) = v``.
    """

    unbiased: bool = True

    @abstractmethod
    def __call__(self, v: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Return the compressed vector as a dense tensor of ``v``'s shape (zeros where dropped)."""

    @abstractmethod
    def omega(self, d: int) -> float:
        """Variance factor: ``E||C(v) - v||^2 <= omega ||v||^2`` for vectors of length ``d``."""

    @abstractmethod
    def payload_bytes(self, d: int) -> int:
        """Bytes one compressed vector of length ``d`` takes on the wire."""

    def fraction(self, d: int) -> float:
        """Fraction ``q`` of the ``d`` coordinates whose value is sent (1 if all are)."""
        return 1.0

    def support(self, d: int, generator: torch.Generator | None = None) -> torch.Tensor | None:
        """Boolean mask of the coordinates one draw sends, when it depends only on the seed.

        Called with a generator in the same state as for ``__call__``, it returns the
        coordinates that draw keeps (what a receiver regenerates from the shared seed);
        ``None`` means data-dependent or dense.
        """
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Identity(Compressor):
    """No compression (``omega = 0``)."""

    def __call__(self, v: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Return a copy of ``v``."""
        return v.clone()

    def omega(self, d: int) -> float:
        """Zero."""
        return 0.0

    def payload_bytes(self, d: int) -> int:
        """``4 d``."""
        return BYTES_PER_VALUE * d


class RandK(Compressor):
    """Keep ``k = max(1, round(ratio * d))`` uniformly random coordinates, rescaled by ``d/k``.

    Unbiased with ``omega = d/k - 1``. With ``seeded_indices=True`` the receiver regenerates
    the indices from the shared seed, so only the ``k`` values travel.

    Args:
        ratio: Fraction of coordinates kept, in (0, 1].
        seeded_indices: Whether indices are derived from a shared seed (not sent).
    """

    def __init__(self, ratio: float, seeded_indices: bool = True) -> None:
        self.ratio: float = _check_ratio(ratio)
        self.seeded_indices: bool = bool(seeded_indices)

    def k(self, d: int) -> int:
        """Number of kept coordinates."""
        return max(1, min(d, round(self.ratio * d)))

    def indices(self, d: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """The kept indices (on CPU) for one draw."""
        return torch.randperm(d, generator=generator)[: self.k(d)]

    def support(self, d: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Mask of the ``k`` kept coordinates of the draw ``generator`` would make."""
        mask = torch.zeros(d, dtype=torch.bool)
        mask[self.indices(d, generator)] = True
        return mask

    def __call__(self, v: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Return ``(d/k) v`` on ``k`` random coordinates and zeros elsewhere."""
        d = v.numel()
        idx = self.indices(d, generator).to(v.device)
        out = torch.zeros_like(v)
        out[idx] = v[idx] * (d / self.k(d))
        return out

    def omega(self, d: int) -> float:
        """``d/k - 1``."""
        return d / self.k(d) - 1.0

    def payload_bytes(self, d: int) -> int:
        """``4k`` (values) plus ``4k`` for the indices when they are not seeded."""
        k = self.k(d)
        return BYTES_PER_VALUE * k * (1 if self.seeded_indices else 2)

    def fraction(self, d: int) -> float:
        """``k/d``."""
        return self.k(d) / d

    def __repr__(self) -> str:
        return f"RandK(ratio={self.ratio}, seeded_indices={self.seeded_indices})"


class StochasticQuant(Compressor):
    """QSGD-style unbiased stochastic quantisation to ``levels`` levels per sign.

    ``C(v)_i = ||v|| sign(v_i) xi_i / s`` with ``xi_i`` the random rounding of
    ``s |v_i| / ||v||`` to a neighbouring integer; ``omega = min(d/s^2, sqrt(d)/s)``
    (Alistarh et al., 2017).

    Args:
        levels: Number of levels ``s >= 1``.
    """

    def __init__(self, levels: int) -> None:
        if isinstance(levels, bool) or not isinstance(levels, int) or levels < 1:
            raise ValueError(f"levels must be an int >= 1, got {levels!r}")
        self.levels: int = levels

    def __call__(self, v: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Return the quantised vector."""
        norm = torch.linalg.vector_norm(v)
        if norm == 0:
            return torch.zeros_like(v)
        scaled = v.abs() / norm * self.levels
        low = scaled.floor()
        u = torch.rand(v.shape, generator=generator, dtype=v.dtype).to(v.device)
        xi = low + (u < (scaled - low)).to(v.dtype)
        return norm * v.sign() * xi / self.levels

    def omega(self, d: int) -> float:
        """``min(d/s^2, sqrt(d)/s)``."""
        s = self.levels
        return min(d / s**2, math.sqrt(d) / s)

    def payload_bytes(self, d: int) -> int:
        """One float for the norm plus ``ceil(log2(2s+1))`` bits per coordinate."""
        bits = math.ceil(math.log2(2 * self.levels + 1))
        return BYTES_PER_VALUE + math.ceil(d * bits / 8)

    def __repr__(self) -> str:
        return f"StochasticQuant(levels={self.levels})"


class TopK(Compressor):
    """Keep the ``k`` largest-magnitude coordinates, unscaled. Biased: a baseline only.

    Args:
        ratio: Fraction of coordinates kept, in (0, 1].
    """

    unbiased = False

    def __init__(self, ratio: float) -> None:
        self.ratio: float = _check_ratio(ratio)

    def k(self, d: int) -> int:
        """Number of kept coordinates."""
        return max(1, min(d, round(self.ratio * d)))

    def __call__(self, v: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Return ``v`` on its top-k coordinates, zeros elsewhere."""
        idx = torch.topk(v.abs(), self.k(v.numel())).indices
        out = torch.zeros_like(v)
        out[idx] = v[idx]
        return out

    def omega(self, d: int) -> float:
        """Contraction-based bound ``d/k - 1`` (top-k is not unbiased; reporting only)."""
        return d / self.k(d) - 1.0

    def payload_bytes(self, d: int) -> int:
        """``4k`` values plus ``4k`` indices."""
        return 2 * BYTES_PER_VALUE * self.k(d)

    def fraction(self, d: int) -> float:
        """``k/d``."""
        return self.k(d) / d

    def __repr__(self) -> str:
        return f"TopK(ratio={self.ratio})"
