"""Distributed Shifted Compression (DSC): DIANA-style shifts, per client and public.

Client ``k`` keeps a shift ``h_k`` (initially 0) and sends ``c_k = C(u_k - h_k)``, then sets
``h_k <- h_k + alpha c_k``. Everybody keeps the public shift ``s = sum_k p_k h_k``, updated
from the reassembled aggregate ``v = s + sum_k p_k c_k`` as ``s <- s + alpha (v - s)``.
Because ``C`` is unbiased, ``v`` is an unbiased estimate of ``sum_k p_k u_k``, and the
compression error shrinks as ``h_k`` learns ``u_k`` (Mishchenko et al., 2019, DIANA).
"""

from __future__ import annotations

import math
import warnings

import torch

from eris_fl.compress import Compressor


def default_alpha(compressor: Compressor, d: int) -> float:
    """The largest step the theory allows, ``1 / (1 + omega)``."""
    return 1.0 / (1.0 + compressor.omega(d))


def resolve_alpha(alpha: float | None, compressor: Compressor, d: int) -> float:
    """Validate a shift step ``alpha`` (``None`` -> :func:`default_alpha`).

    Raises:
        ValueError: If ``alpha <= 0`` or not finite.

    Warns:
        UserWarning: If ``alpha > 1/(1+omega)`` (the convergence guarantee is lost).
    """
    limit = default_alpha(compressor, d)
    if alpha is None:
        return limit
    if not math.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"shift_alpha must be > 0, got {alpha}")
    if alpha > limit * (1 + 1e-12):
        warnings.warn(
            f"shift_alpha={alpha} exceeds 1/(1+omega)={limit:.4g} for {compressor!r}; "
            "DSC's convergence guarantee needs alpha <= 1/(1+omega)",
            stacklevel=3,
        )
    return float(alpha)


class ShiftState:
    """One shift vector with its step: a client's ``h_k`` or the public ``s``.

    Args:
        dim: Length ``d``.
        alpha: Shift step ``alpha`` in (0, 1].
        dtype: Dtype of the shift.
        device: Device of the shift.

    Example:
        >>> from eris_fl.compress import RandK
        >>> h = ShiftState(4, alpha=0.5)
        >>> c = h.step(torch.ones(4), RandK(0.5), torch.Generator().manual_seed(0))
        >>> bool((h.shift == 0.5 * c).all())
        True
    """

    def __init__(
        self,
        dim: int,
        alpha: float,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device = "cpu",
    ) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        if not alpha > 0:
            raise ValueError(f"alpha must be > 0, got {alpha}")
        self.alpha: float = float(alpha)
        self.shift: torch.Tensor = torch.zeros(dim, dtype=dtype, device=device)

    def step(
        self, u: torch.Tensor, compressor: Compressor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Client side: return the message ``c = C(u - h)`` and update ``h <- h + alpha c``."""
        c = compressor(u - self.shift, generator)
        self.shift += self.alpha * c
        return c

    def track(self, v: torch.Tensor) -> None:
        """Public side: ``s <- s + alpha (v - s)`` from the reassembled aggregate ``v``."""
        self.shift += self.alpha * (v - self.shift)
