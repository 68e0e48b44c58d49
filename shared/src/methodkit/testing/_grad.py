"""Gradient checks: against central finite differences and against torch autograd.

Used by package test suites; torch is imported only by the autograd helper.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    import torch


def relative_error(estimate: NDArray[np.floating], reference: NDArray[np.floating]) -> float:
    """Return ``||estimate - reference|| / ||reference||`` (absolute error if the norm is 0)."""
    est = np.asarray(estimate, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    if est.shape != ref.shape:
        raise ValueError(f"shape mismatch: estimate {est.shape} vs reference {ref.shape}")
    diff = float(np.linalg.norm(est - ref))
    norm = float(np.linalg.norm(ref))
    return diff / norm if norm > 0 else diff


def finite_difference_grad(
    f: Callable[[NDArray[np.float64]], float],
    x: NDArray[np.floating],
    eps: float = 1e-6,
) -> NDArray[np.float64]:
    """Central-difference gradient of a scalar function, one coordinate at a time.

    Costs ``2 * x.size`` calls of ``f``; the truncation error is O(eps²).

    Args:
        f: Scalar function of an array shaped like ``x``.
        x: Point at which to differentiate (copied to float64).
        eps: Step size, > 0.

    Returns:
        The gradient, shaped like ``x``.

    Raises:
        ValueError: If ``eps`` <= 0 or ``f`` returns a non-finite value.
    """
    if eps <= 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    x0 = np.array(x, dtype=np.float64)
    grad = np.empty_like(x0)
    flat, gflat = x0.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        orig = flat[i]
        flat[i] = orig + eps
        up = float(f(x0))
        flat[i] = orig - eps
        down = float(f(x0))
        flat[i] = orig
        if not (np.isfinite(up) and np.isfinite(down)):
            raise ValueError(f"f returned a non-finite value at coordinate {i}")
        gflat[i] = (up - down) / (2 * eps)
    return grad


def assert_grad_matches_autograd(
    loss_fn: Callable[[], torch.Tensor],
    params: Sequence[torch.Tensor],
    grads: Sequence[torch.Tensor],
    rtol: float = 1e-6,
) -> float:
    """Assert that ``grads`` equal autograd's gradients of ``loss_fn()`` w.r.t. ``params``.

    The error is measured on all gradients concatenated, so a tiny tensor cannot hide
    behind a large one only if its share of the norm is small: use float64 for exactness
    checks.

    Args:
        loss_fn: Zero-argument function returning a scalar tensor built from ``params``.
        params: Tensors with ``requires_grad=True``.
        grads: The gradient estimate to check, one tensor per parameter.
        rtol: Allowed relative error of the concatenated gradient.

    Returns:
        The measured relative error.

    Raises:
        ValueError: If the lists differ in length or a shape does not match.
        AssertionError: If the error exceeds ``rtol``.
    """
    import torch

    params = list(params)
    grads = list(grads)
    if len(params) != len(grads):
        raise ValueError(f"{len(params)} params but {len(grads)} gradient tensors")
    for p, g in zip(params, grads, strict=True):
        if tuple(p.shape) != tuple(g.shape):
            raise ValueError(f"gradient shape {tuple(g.shape)} != parameter {tuple(p.shape)}")
    loss = loss_fn()
    reference = torch.autograd.grad(loss, params, allow_unused=True)
    ref = np.concatenate(
        [
            (torch.zeros_like(p) if r is None else r).detach().cpu().double().reshape(-1).numpy()
            for p, r in zip(params, reference, strict=True)
        ]
    )
    est = np.concatenate([g.detach().cpu().double().reshape(-1).numpy() for g in grads])
    err = relative_error(est, ref)
    if not err <= rtol:
        raise AssertionError(f"gradient relative error {err:.3e} > rtol {rtol:.1e}")
    return err
