"""Baselines: centralised FedAvg, FedAvg with unshifted rand-k/top-k, local-DP FedAvg.

FedAvg is ERIS's round (:mod:`eris_fl._eris`) with FedAvg's plan: one aggregator, the
server, owning every coordinate, and no shift.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from eris_fl._checks import EvalFn, as_update_fn, check_datasets, evaluate
from eris_fl._eris import (
    aggregate_shard,
    apply_update,
    client_message,
    local_update,
    message_support,
    plan_round,
)
from eris_fl._seeding import NOISE, derived_generator
from eris_fl.client import LocalTrainer, UpdateFn
from eris_fl.config import FedAvgConfig
from eris_fl.observers import ByteCounter, Observer, RoundView
from eris_fl.params import assign, flatten
from eris_fl.simulation import History

logger = logging.getLogger(__name__)


def privatise(u: torch.Tensor, config: FedAvgConfig, round: int, client: int) -> torch.Tensor:
    """Local DP baseline: clip ``u`` to ``config.clip`` and add Gaussian noise (if set)."""
    if config.clip is None:
        return u
    norm = float(torch.linalg.vector_norm(u))
    c = u * min(1.0, config.clip / norm) if norm > 0 else u.clone()
    if config.noise_multiplier > 0:
        gen = derived_generator(config.seed, round, client, NOISE)
        noise = torch.randn(u.numel(), generator=gen, dtype=c.dtype).to(c.device)
        c = c + config.noise_multiplier * config.clip * noise
    return c


def run_fedavg(
    model: nn.Module,
    client_datasets: Sequence[Any],
    config: FedAvgConfig,
    rounds: int,
    trainer: LocalTrainer | UpdateFn | None = None,
    eval_fn: EvalFn | None = None,
    tap: Observer | None = None,
    count_bytes: bool = False,
) -> History:
    """Train with a central server: ``x_{t+1} = x_t + lambda sum_k p_k C(clip(u_k) + noise)``.

    Uses the same per-client random streams as :func:`~eris_fl.run_simulation`
    with the same seed, so ERIS without DSC reproduces it exactly.

    Args:
        model: The global model, updated in place.
        client_datasets: One dataset per client.
        config: :class:`~eris_fl.config.FedAvgConfig`.
        rounds: Number of rounds, ``>= 0``.
        trainer: Local work (default: 1 epoch of SGD, lr 0.1, batch 16).
        eval_fn: Optional ``f(model) -> dict | float`` after each round.
        tap: Optional observer; the server is aggregator ``-1`` and owns every coordinate.
        count_bytes: Count the bytes (``History.ledger``).

    Returns:
        :class:`~eris_fl.History`.
    """
    if not isinstance(config, FedAvgConfig):
        raise TypeError(f"config must be a FedAvgConfig, got {type(config).__name__}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
        raise ValueError(f"rounds must be an int >= 0, got {rounds!r}")
    sizes = check_datasets(client_datasets)
    update_fn = as_update_fn(trainer, config)
    x = flatten(model, config.trainable_only, config.include_buffers)
    d = x.numel()
    counter = ByteCounter(config.compressor) if count_bytes else None
    observers = [o for o in (counter, tap) if o is not None]
    history = History(byte_counter=counter)
    for t in range(rounds):
        plan = plan_round(config, sizes, t, d)
        updates, messages = {}, {}
        for k in plan.clients:
            updates[k] = local_update(update_fn, model, x, client_datasets[k], config.seed, plan, k)
            c = privatise(updates[k], config, t, k)
            messages[k] = client_message(c, config.compressor, None, config.seed, plan, k)
        v = aggregate_shard([messages[k] for k in plan.clients], plan.weights)
        x_next = apply_update(x, v, config.server_lr, None)
        if observers:
            support = {
                k: message_support(config.compressor, d, config.seed, plan, k) for k in messages
            }
            view = RoundView(
                t, x, x_next.clone(), plan.clients, plan.aggregators, plan.weights,
                plan.owner.to(x.device), updates, messages, support, len(sizes),
            )  # fmt: skip
            for observer in observers:
                observer(view)
        x = x_next
        assign(model, x, config.trainable_only, config.include_buffers)
        history.metrics.append(evaluate(eval_fn, model, t))
        logger.info("FedAvg round %d: %s", t, history.metrics[-1])
    history.params = x.clone()
    return history
