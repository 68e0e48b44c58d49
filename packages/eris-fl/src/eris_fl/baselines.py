"""Baselines: centralised FedAvg, FedAvg with unshifted rand-k/top-k, local-DP FedAvg."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from eris_fl._eris import History, RoundView, Tap, shard_bytes
from eris_fl._round import (
    EvalFn,
    as_update_fn,
    check_datasets,
    check_update,
    evaluate,
    participants,
    round_weights,
)
from eris_fl._seeding import COMPRESS, LOCAL, NOISE, derived_generator
from eris_fl.client import LocalTrainer, UpdateFn
from eris_fl.compress import BYTES_PER_VALUE
from eris_fl.config import FedAvgConfig
from eris_fl.params import assign, flatten


def run_fedavg(
    model: nn.Module,
    client_datasets: Sequence[Any],
    config: FedAvgConfig,
    rounds: int,
    trainer: LocalTrainer | UpdateFn | None = None,
    eval_fn: EvalFn | None = None,
    tap: Tap | None = None,
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
        tap: Optional observer; the server is "aggregator 0" and owns every coordinate.

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
    history = History()
    for t in range(rounds):
        clients = participants(len(sizes), config.clients_per_round, config.seed, t)
        p = round_weights(config.weights, sizes, clients)
        updates, messages, support = {}, {}, {}
        v = torch.zeros_like(x)
        for k, w in zip(clients, p, strict=True):
            u = update_fn(
                model, x.clone(), client_datasets[k], derived_generator(config.seed, t, k, LOCAL)
            )
            updates[k] = check_update(u, d, k, t).detach()
            c = updates[k]
            if config.clip is not None:
                norm = float(torch.linalg.vector_norm(c))
                c = c * min(1.0, config.clip / norm) if norm > 0 else c.clone()
                if config.noise_multiplier > 0:
                    gen = derived_generator(config.seed, t, k, NOISE)
                    noise = torch.randn(d, generator=gen, dtype=c.dtype).to(c.device)
                    c = c + config.noise_multiplier * config.clip * noise
            sup = None
            if config.compressor is not None:
                key = (config.seed, t, k, COMPRESS)
                c = config.compressor(c, derived_generator(*key))
                sup = config.compressor.support(d, derived_generator(*key))
            messages[k], support[k] = c, sup
            history.ledger.record(
                t, f"client{k}", "server", shard_bytes(config.compressor, c, sup), "shard"
            )
            v += w * c
        x_next = x + config.server_lr * v
        for k in range(len(sizes)):
            history.ledger.record(t, "server", f"client{k}", BYTES_PER_VALUE * d, "model")
        if tap is not None:
            owner = torch.zeros(d, dtype=torch.long, device=x.device)
            tap(
                RoundView(t, x, x_next.clone(), clients, [-1], p, owner, updates, messages, support)
            )
        x = x_next
        assign(model, x, config.trainable_only, config.include_buffers)
        history.metrics.append(evaluate(eval_fn, model, t))
    history.params = x.clone()
    return history
