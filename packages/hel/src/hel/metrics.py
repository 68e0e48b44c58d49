"""Gradient-agreement metrics between estimators and BPTT."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from hel._estimator import GradientEstimator
from hel.baselines import BPTT
from hel.models import EchoRNN

__all__ = ["compare_estimators", "grad_cosine", "grad_relative_error"]


def _flat(grads: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.cat([g.detach().reshape(-1).double() for g in grads])


def grad_cosine(estimate: Sequence[torch.Tensor], reference: Sequence[torch.Tensor]) -> float:
    """Cosine similarity of two gradients given as lists of tensors (concatenated)."""
    a, b = _flat(estimate), _flat(reference)
    denom = float(a.norm() * b.norm())
    return float(a @ b) / denom if denom > 0 else float("nan")


def grad_relative_error(
    estimate: Sequence[torch.Tensor], reference: Sequence[torch.Tensor]
) -> float:
    """``||estimate - reference|| / ||reference||`` over the concatenated gradients."""
    a, b = _flat(estimate), _flat(reference)
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


def _cell_grads(est: GradientEstimator, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    model = est.model
    for p in model.parameters():
        p.grad = None
    est.backward(x, y)
    grads = [
        torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in model.cell.parameters()
    ]
    for p in model.parameters():
        p.grad = None
    return grads


def compare_estimators(
    model: EchoRNN,
    batch: tuple[torch.Tensor, torch.Tensor],
    loss_fn: Any,
    estimators: Mapping[str, GradientEstimator],
) -> dict[str, dict[str, float]]:
    """Cosine and relative error of each estimator's recurrent-core gradient against BPTT.

    Args:
        model: The :class:`~hel.models.EchoRNN` (its ``.grad`` fields are cleared).
        batch: ``(x, y)``.
        loss_fn: The scalar loss used for the BPTT reference.
        estimators: Name -> estimator built on ``model``.

    Returns:
        ``{name: {"cosine": ..., "rel_error": ..., "cosine/<param>": ..., ...}}``.
    """
    x, y = batch
    ref = _cell_grads(BPTT(model, loss_fn), x, y)
    names = [n for n, _ in model.cell.named_parameters()]
    out: dict[str, dict[str, float]] = {}
    for key, est in estimators.items():
        if est.model is not model:
            raise ValueError(f"estimator {key!r} was built on a different model")
        g = _cell_grads(est, x, y)
        row = {"cosine": grad_cosine(g, ref), "rel_error": grad_relative_error(g, ref)}
        for n, gi, ri in zip(names, g, ref, strict=True):
            row[f"cosine/{n}"] = grad_cosine([gi], [ri])
            row[f"rel_error/{n}"] = grad_relative_error([gi], [ri])
        out[key] = row
    return out
