"""Validation of a Gaussian source ``N(mu, L L^T)`` given by its mean and Cholesky factor."""

from __future__ import annotations

import math

import torch

__all__ = ["validated_prior"]


def validated_prior(
    prior_mean: torch.Tensor | None,
    prior_scale_tril: torch.Tensor | None,
    source_shape: tuple[int, ...],
    device: torch.device,
    dtype: torch.dtype,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Return ``(mu, L)`` on ``device`` / ``dtype``, ``mu`` reshaped to ``source_shape``.

    Raises:
        ValueError: If ``mu`` has the wrong number of elements, or ``L`` is not a square
            ``(D, D)`` lower-triangular matrix with a positive diagonal
            (``D = prod(source_shape)``).
    """
    D = math.prod(source_shape)
    mu = None
    if prior_mean is not None:
        mu = torch.as_tensor(prior_mean, device=device, dtype=dtype)
        if mu.numel() != D:
            raise ValueError(
                f"prior_mean must have {D} elements (source_shape {source_shape}), "
                f"got shape {tuple(mu.shape)}"
            )
        mu = mu.reshape(source_shape)
    L = None
    if prior_scale_tril is not None:
        L = torch.as_tensor(prior_scale_tril, device=device, dtype=dtype)
        if L.ndim != 2 or L.shape[0] != L.shape[1]:
            raise ValueError(f"prior_scale_tril must be square, got shape {tuple(L.shape)}")
        if L.shape[0] != D:
            raise ValueError(f"prior_scale_tril must be ({D}, {D}), got {tuple(L.shape)}")
        if not torch.equal(L, torch.tril(L)):
            raise ValueError("prior_scale_tril must be lower-triangular")
        if not bool((torch.diagonal(L) > 0).all()):
            raise ValueError("prior_scale_tril must have a positive diagonal")
    return mu, L
