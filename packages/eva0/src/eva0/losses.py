"""Per-sample test-time losses on logits: entropy and the scale-invariant entropy of EVA-0."""

from __future__ import annotations

import torch

__all__ = ["entropy", "scale_invariant_entropy"]


def _check_logits(logits: torch.Tensor) -> None:
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"logits must be a torch.Tensor, got {type(logits).__name__}")
    if logits.dim() != 2:
        raise ValueError(f"logits must be 2-D (batch, classes), got shape {tuple(logits.shape)}")


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Shannon entropy of ``softmax(logits)`` per sample.

    Args:
        logits: Tensor of shape (B, C).

    Returns:
        Tensor of shape (B,), in nats.

    Raises:
        TypeError: If ``logits`` is not a tensor.
        ValueError: If ``logits`` is not 2-D.
    """
    _check_logits(logits)
    logp = torch.log_softmax(logits, dim=1)
    return -(logp.exp() * logp).sum(dim=1)


def scale_invariant_entropy(logits: torch.Tensor, tau: float) -> torch.Tensor:
    r"""Entropy of the logits renormalised to the fixed norm ``tau`` (inferred form, spec step 3).

    .. math::  \ell_i = H\big(\mathrm{softmax}(\tau\, f_i / \lVert f_i \rVert_2)\big)

    Multiplying the logits by any ``c > 0`` leaves the loss unchanged, so an optimizer cannot
    lower it by inflating the logit norm.

    Args:
        logits: Tensor of shape (B, C).
        tau: Target norm (> 0).

    Returns:
        Tensor of shape (B,).

    Raises:
        TypeError: If ``logits`` is not a tensor.
        ValueError: If ``logits`` is not 2-D or ``tau`` <= 0.
    """
    _check_logits(logits)
    if not tau > 0:
        raise ValueError(f"tau must be > 0, got {tau}")
    norm = torch.linalg.vector_norm(logits, dim=1, keepdim=True).clamp_min(1e-12)
    return entropy(float(tau) * logits / norm)
