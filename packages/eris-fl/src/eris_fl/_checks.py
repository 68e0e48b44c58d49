"""Input checks shared by every transport: the trainer, the client datasets, the updates, eval."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from eris_fl.client import LocalTrainer, UpdateFn, dataset_size

EvalFn = Callable[[nn.Module], "dict[str, float] | float"]


def as_update_fn(trainer: LocalTrainer | UpdateFn | None, config: Any) -> UpdateFn:
    """The local-work callable of a run: ``trainer``'s ``update``, or the default trainer."""
    if trainer is None:
        return LocalTrainer(
            trainable_only=config.trainable_only, include_buffers=config.include_buffers
        ).update
    if isinstance(trainer, LocalTrainer):
        return trainer.update
    if callable(trainer):
        return trainer
    raise TypeError(f"trainer must be a LocalTrainer or a callable, got {type(trainer).__name__}")


def evaluate(eval_fn: EvalFn | None, model: nn.Module, round: int) -> dict[str, float]:
    """The metrics row of ``round``: ``{"round": t}`` plus what ``eval_fn(model)`` returns."""
    row: dict[str, float] = {"round": float(round)}
    if eval_fn is not None:
        model.eval()
        with torch.no_grad():
            out = eval_fn(model)
        row.update(out if isinstance(out, dict) else {"metric": float(out)})
    return row


def check_datasets(
    client_datasets: Sequence[Any], client_ids: Sequence[int] | None = None
) -> list[int]:
    """Return the client sizes; raise, naming the client, if there are none or one is empty.

    ``client_ids`` names the datasets in errors (default ``0..K-1``; a rank passes its own).
    """
    if len(client_datasets) == 0:
        raise ValueError("client_datasets is empty: need at least one client")
    ids = range(len(client_datasets)) if client_ids is None else client_ids
    sizes = []
    for k, data in zip(ids, client_datasets, strict=True):
        n = dataset_size(data)
        if n == 0:
            raise ValueError(f"client {k} has an empty dataset")
        sizes.append(n)
    return sizes


def check_update(u: Any, d: int, client: int, round: int) -> torch.Tensor:
    """Validate a client update: a 1-D tensor of length ``d`` with finite entries."""
    if not isinstance(u, torch.Tensor):
        raise TypeError(f"client {client} returned {type(u).__name__}, expected a torch.Tensor")
    if u.dim() != 1 or u.numel() != d:
        raise ValueError(
            f"client {client} update has shape {tuple(u.shape)}, expected ({d},) (the model size)"
        )
    if not bool(torch.isfinite(u).all()):
        raise ValueError(f"client {client} returned a non-finite update in round {round}")
    return u
