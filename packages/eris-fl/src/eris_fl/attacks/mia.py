"""Loss-threshold membership inference on an observer's estimate of a client's model."""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import torch
from numpy.typing import ArrayLike
from torch import nn

from eris_fl.params import assign


def observer_model_estimate(
    x_t: torch.Tensor, observed: torch.Tensor, mask: torch.Tensor | None = None, scale: float = 1.0
) -> torch.Tensor:
    """The observer's guess of the client's local model: ``x_t + scale * observed`` on ``mask``.

    On the coordinates it does not see, the observer can only use the public ``x_t``.

    Args:
        x_t: Global state the client started from.
        observed: The update (or message) the observer received, full length.
        mask: Coordinates it actually received (``None`` = all).
        scale: Undo a known rescaling (e.g. ``k/d`` for a rand-k message).

    Raises:
        ValueError: If the lengths differ.
    """
    if observed.shape != x_t.shape:
        raise ValueError(f"observed has shape {tuple(observed.shape)}, x_t {tuple(x_t.shape)}")
    if mask is None:
        return x_t + scale * observed
    if mask.shape != x_t.shape:
        raise ValueError(f"mask must be 1-D of length {x_t.numel()}, got {tuple(mask.shape)}")
    return torch.where(mask.to(torch.bool), x_t + scale * observed, x_t)


def auc(positive: ArrayLike, negative: ArrayLike) -> float:
    """ROC AUC = P(score of a positive > score of a negative), ties counted as 1/2."""
    pos = np.asarray(positive, dtype=np.float64)
    neg = np.asarray(negative, dtype=np.float64)
    if pos.size == 0 or neg.size == 0:
        raise ValueError("auc needs at least one positive and one negative score")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (pos.size * neg.size))


def _per_example_ce(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(out, y, reduction="none")


@torch.no_grad()
def loss_threshold_mia(
    model: nn.Module,
    params: torch.Tensor,
    members: tuple[torch.Tensor, torch.Tensor],
    nonmembers: tuple[torch.Tensor, torch.Tensor],
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = _per_example_ce,
    trainable_only: bool = True,
    include_buffers: bool = True,
) -> float:
    """AUC of the attack "member iff the loss is low" (score ``-loss``) under ``params``.

    Args:
        model: Architecture to evaluate (not modified: a copy receives ``params``).
        params: Flat state to attack (e.g. :func:`observer_model_estimate`).
        members: ``(X, y)`` of the client's training rows.
        nonmembers: ``(X, y)`` of held-out rows.
        loss_fn: Per-example loss ``(outputs, y) -> (n,)``.
        trainable_only: As in :func:`~eris_fl.params.flatten`.
        include_buffers: As in :func:`~eris_fl.params.flatten`.

    Returns:
        The AUC (0.5 = no better than chance).
    """
    probe = copy.deepcopy(model)
    assign(probe, params, trainable_only, include_buffers)
    probe.eval()
    s_in = -loss_fn(probe(members[0]), members[1])
    s_out = -loss_fn(probe(nonmembers[0]), nonmembers[1])
    return auc(s_in.cpu().numpy(), s_out.cpu().numpy())
