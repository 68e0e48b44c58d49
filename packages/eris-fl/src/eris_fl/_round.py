"""Round bookkeeping shared by the ERIS simulator, the FedAvg reference and the gloo engine."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from eris_fl._seeding import SELECT, derived_generator
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


def check_datasets(client_datasets: Sequence[Any]) -> list[int]:
    """Return the client sizes; raise if there are no clients or one is empty."""
    if len(client_datasets) == 0:
        raise ValueError("client_datasets is empty: need at least one client")
    sizes = []
    for k, data in enumerate(client_datasets):
        n = dataset_size(data)
        if n == 0:
            raise ValueError(f"client {k} has an empty dataset")
        sizes.append(n)
    return sizes


def participants(
    num_clients: int, clients_per_round: int | None, seed: int, round: int
) -> list[int]:
    """Sorted ids of the clients taking part in ``round`` (all of them by default)."""
    if clients_per_round is None:
        return list(range(num_clients))
    if clients_per_round > num_clients:
        raise ValueError(
            f"clients_per_round={clients_per_round} exceeds the number of clients {num_clients}"
        )
    gen = derived_generator(seed, round, SELECT)
    return sorted(torch.randperm(num_clients, generator=gen)[:clients_per_round].tolist())


def select_aggregators(
    selection: str | Sequence[int], num_aggregators: int, clients: list[int], seed: int, round: int
) -> list[int]:
    """Client id acting as aggregator ``a`` for ``a = 0..A-1`` in ``round``."""
    A = num_aggregators
    if len(clients) < A:
        raise ValueError(
            f"num_aggregators={A} exceeds the {len(clients)} participating clients of round {round}"
        )
    if isinstance(selection, str):
        if selection == "round_robin":
            return [clients[(round * A + j) % len(clients)] for j in range(A)]
        gen = derived_generator(seed, round, SELECT, 1)
        return [clients[i] for i in torch.randperm(len(clients), generator=gen)[:A].tolist()]
    chosen = [int(c) for c in selection]
    missing = [c for c in chosen if c not in clients]
    if missing:
        raise ValueError(f"aggregators {missing} do not participate in round {round}")
    return chosen


def round_weights(
    weights: str | Sequence[float], sizes: Sequence[int], clients: list[int]
) -> list[float]:
    """``p_k`` for the participating clients, normalised to sum to 1."""
    if isinstance(weights, str):
        raw = [float(sizes[k]) if weights == "samples" else 1.0 for k in clients]
    else:
        if len(weights) != len(sizes):
            raise ValueError(f"weights has {len(weights)} entries for {len(sizes)} clients")
        raw = [float(weights[k]) for k in clients]
    total = math.fsum(raw)
    if not total > 0:
        raise ValueError(f"client weights must sum to > 0, got {total} for clients {clients}")
    return [w / total for w in raw]


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
