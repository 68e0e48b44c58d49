r"""Fusion of per-task Gaussian experts over the shared latent ``z``.

Product of experts with the prior expert ``N(0, I)`` (MVAE):

.. math:: \\Lambda = I + \\sum_{t \\in obs} \\mathrm{diag}(\\sigma_t^{-2}), \\qquad
    \\mu = \\Lambda^{-1} \\sum_{t \\in obs} \\sigma_t^{-2} \\odot \\mu_t .

Missing experts (``present_mask`` False) drop out of both sums; with none present the result
is the prior. The uniform mixture of unimodal posteriors (MMVAE) is the alternative.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["moe_moments", "moe_sample", "poe"]


def _stack(xs: Sequence[Tensor] | Tensor) -> Tensor:
    return xs if isinstance(xs, Tensor) else torch.stack(list(xs), 0)


def _check_shapes(
    mu_t: Tensor, lv_t: Tensor, present_mask: Sequence[Tensor] | Tensor | None
) -> None:
    if mu_t.dim() != 3 or mu_t.shape != lv_t.shape:
        raise ValueError(
            f"mus and logvars must both have shape (T, N, D), got {tuple(mu_t.shape)} and "
            f"{tuple(lv_t.shape)}"
        )
    if present_mask is not None and tuple(_stack(present_mask).shape) != tuple(mu_t.shape[:2]):
        raise ValueError(
            f"present_mask must have shape (T, N) = {tuple(mu_t.shape[:2])}, got "
            f"{tuple(_stack(present_mask).shape)}"
        )


def poe(
    mus: Sequence[Tensor] | Tensor,
    logvars: Sequence[Tensor] | Tensor,
    present_mask: Sequence[Tensor] | Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Product of Gaussian experts including the standard-normal prior expert.

    Args:
        mus: ``T`` expert means, each ``(N, D)`` (or one tensor ``(T, N, D)``).
        logvars: Their log-variances, same shape; ``+inf`` is an expert of infinite variance.
        present_mask: ``(T, N)`` booleans; an absent expert contributes nothing.

    Returns:
        ``(mu, logvar)`` of the fused Gaussian, each ``(N, D)``.

    Raises:
        ValueError: If the shapes of ``mus``, ``logvars`` and ``present_mask`` disagree.

    Example:
        >>> mu, lv = poe(torch.ones(1, 1, 1), torch.zeros(1, 1, 1))
        >>> float(mu), float(lv.exp())
        (0.5, 0.5)
    """
    mu_t, lv_t = _stack(mus), _stack(logvars)
    _check_shapes(mu_t, lv_t, present_mask)
    prec_t = torch.exp(-lv_t)  # sigma_t^{-2}; exp(-inf) = 0 for an uninformative expert
    if present_mask is not None:
        m = _stack(present_mask).to(mu_t.dtype).unsqueeze(-1)
        prec_t = prec_t * m
        mu_t = torch.where(m > 0, mu_t, torch.zeros_like(mu_t))
    lam = 1.0 + prec_t.sum(0)  # Lambda = I + sum_t diag(sigma_t^{-2})
    mu = (prec_t * mu_t).sum(0) / lam  # Lambda^{-1} sum_t sigma_t^{-2} mu_t
    return mu, -torch.log(lam)


def moe_moments(
    mus: Sequence[Tensor] | Tensor,
    logvars: Sequence[Tensor] | Tensor,
    present_mask: Sequence[Tensor] | Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Mean and (diagonal) variance of the uniform mixture of the present experts.

    A person with no present expert gets the prior ``N(0, I)``.
    """
    mu_t, lv_t = _stack(mus), _stack(logvars)
    _check_shapes(mu_t, lv_t, present_mask)
    T = mu_t.shape[0]
    m = (
        torch.ones(mu_t.shape[:2], dtype=mu_t.dtype, device=mu_t.device)
        if present_mask is None
        else _stack(present_mask).to(mu_t.dtype)
    )
    k = m.sum(0).unsqueeze(-1)  # (N, 1)
    w = (m.unsqueeze(-1) / k.clamp(min=1)).expand(T, *mu_t.shape[1:])
    mean = (w * mu_t).sum(0)
    second = (w * (lv_t.exp() + mu_t**2)).sum(0)
    var = second - mean**2
    none = k == 0
    mean = torch.where(none, torch.zeros_like(mean), mean)
    var = torch.where(none, torch.ones_like(var), var)
    return mean, var


def moe_sample(
    mus: Sequence[Tensor] | Tensor,
    logvars: Sequence[Tensor] | Tensor,
    present_mask: Sequence[Tensor] | Tensor | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """One reparameterised sample per person from the uniform mixture of present experts.

    The component is drawn uniformly among the present experts (prior if none).
    """
    mu_t, lv_t = _stack(mus), _stack(logvars)
    _check_shapes(mu_t, lv_t, present_mask)
    T, N, D = mu_t.shape
    m = (
        torch.ones((T, N), dtype=torch.bool, device=mu_t.device)
        if present_mask is None
        else _stack(present_mask).bool()
    )
    u = torch.rand((T, N), generator=generator, device=mu_t.device, dtype=mu_t.dtype)
    score = torch.where(m, u, torch.full_like(u, -1.0))
    k = score.argmax(0)  # a uniformly random present component
    rows = torch.arange(N, device=mu_t.device)
    mu, lv = mu_t[k, rows], lv_t[k, rows]
    none = ~m.any(0)
    mu = torch.where(none[:, None], torch.zeros_like(mu), mu)
    lv = torch.where(none[:, None], torch.zeros_like(lv), lv)
    eps = torch.randn((N, D), generator=generator, device=mu_t.device, dtype=mu_t.dtype)
    return mu + torch.exp(0.5 * lv) * eps
