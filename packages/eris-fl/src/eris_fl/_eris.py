r"""One ERIS round, as in the paper's algorithm box: every transport calls these functions.

Round ``t`` (global state ``x_t``, participants ``S_t``, weights ``p_k``):

1. :func:`plan_round`: participants, the ``A`` aggregators chosen among them, ``p_k``, and a
   shared-seed partition ``owner_t: {1..d} -> {1..A}`` (disjoint shards ``m^(a)``);
2. :func:`local_update` then :func:`client_message`: client ``k`` computes ``u_k`` from
   ``x_t``; with DSC it sends ``c_k = C(u_k - h_k)`` and moves ``h_k <- h_k + alpha c_k``,
   else ``c_k = u_k``; the shard ``c_k[owner == a]`` goes to aggregator ``a``;
3. :func:`aggregate_shard`: aggregator ``a`` computes ``v^(a) = s^(a) + sum_k p_k c_k^(a)``
   and broadcasts it;
4. :func:`apply_update`: everybody reassembles ``v`` and sets ``x_{t+1} = x_t + lambda v``;
   with DSC the public shift moves ``s <- s + alpha (v - s)``.

.. math:: x_{t+1} = x_t + \lambda \Big(s_t + \sum_k p_k c_k\Big)

FedAvg is the same round with one aggregator (the server, id ``-1``) owning every coordinate.
The in-process simulator (:mod:`eris_fl.simulation`), the gloo engine
(:mod:`eris_fl.distributed`) and Flower (:mod:`eris_fl.flower`) only move the shards.

References:
    Fenoglio et al., "ERIS: Enhancing Privacy and Scalability in Federated Learning via
    Federated Shard Aggregation", arXiv:2602.08617, 2026. DSC follows DIANA
    (Mishchenko et al., "Distributed Learning with Compressed Gradient Differences", 2019).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch
from torch import nn

from eris_fl._checks import check_update
from eris_fl._seeding import COMPRESS, LOCAL, SELECT, derived_generator
from eris_fl.client import UpdateFn
from eris_fl.compress import Compressor
from eris_fl.config import ERISConfig, FedAvgConfig
from eris_fl.dsc import ShiftState
from eris_fl.partition import ShardPartitioner

#: The aggregator id of FedAvg's central server in a :class:`RoundPlan`.
SERVER = -1


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


@dataclass(frozen=True)
class RoundPlan:
    """Step 1: who takes part, who aggregates which shard, the weights and the partition.

    ``aggregators[a]`` is the client id summing shard ``a`` (:data:`SERVER` for FedAvg);
    ``weights[i]`` is ``p_k`` of ``clients[i]``; ``owner[j]`` is the shard of coordinate ``j``.
    """

    round: int
    clients: list[int]
    aggregators: list[int]
    weights: list[float]
    owner: torch.Tensor

    @cached_property
    def shards(self) -> list[torch.Tensor]:
        """Coordinate indices of each shard ``a`` (disjoint, together all of ``0..d-1``)."""
        if len(self.aggregators) == 1:
            return [torch.arange(self.owner.numel(), device=self.owner.device)]
        return [(self.owner == a).nonzero().squeeze(1) for a in range(len(self.aggregators))]


def plan_round(
    config: ERISConfig | FedAvgConfig,
    sizes: Sequence[int],
    round: int,
    d: int,
    partitioner: ShardPartitioner | None = None,
) -> RoundPlan:
    """The plan of ``round``; a pure function of the config, so every party computes the same.

    A :class:`~eris_fl.config.FedAvgConfig` gives FedAvg's plan: one aggregator, the server,
    owning every coordinate.
    """
    clients = participants(len(sizes), config.clients_per_round, config.seed, round)
    weights = round_weights(config.weights, sizes, clients)
    if isinstance(config, FedAvgConfig):
        return RoundPlan(round, clients, [SERVER], weights, torch.zeros(d, dtype=torch.long))
    aggregators = select_aggregators(
        config.aggregator_selection, config.num_aggregators, clients, config.seed, round
    )
    part = partitioner or ShardPartitioner(config.num_aggregators, config.partition, config.seed)
    return RoundPlan(round, clients, aggregators, weights, part.owner(round, d))


def local_update(
    update_fn: UpdateFn,
    model: nn.Module,
    x_t: torch.Tensor,
    data: Any,
    seed: int,
    plan: RoundPlan,
    client: int,
) -> torch.Tensor:
    """Step 2a: client ``k``'s update ``u_k`` from ``x_t``, on its own seeded stream."""
    gen = derived_generator(seed, plan.round, client, LOCAL)
    u = update_fn(model, x_t.clone(), data, gen)
    return check_update(u, x_t.numel(), client, plan.round).detach()


def client_message(
    u: torch.Tensor,
    compressor: Compressor | None,
    shift: ShiftState | None,
    seed: int,
    plan: RoundPlan,
    client: int,
) -> torch.Tensor:
    """Step 2b: the message ``c_k``: ``C(u_k - h_k)`` with DSC (``h_k`` moves), else ``u_k``.

    With a compressor and no shift it is the unshifted ``C(u_k)`` of the compression
    baselines. The compressor's randomness is keyed by ``(seed, round, client)``.
    """
    if compressor is None:
        return u
    gen = derived_generator(seed, plan.round, client, COMPRESS)
    return compressor(u, gen) if shift is None else shift.step(u, compressor, gen)


def message_support(
    compressor: Compressor | None, d: int, seed: int, plan: RoundPlan, client: int
) -> torch.Tensor | None:
    """Coordinates a seeded compressor kept in ``c_k`` (``None`` without one), for observers."""
    if compressor is None:
        return None
    return compressor.support(d, derived_generator(seed, plan.round, client, COMPRESS))


def aggregate_shard(
    shards: Sequence[torch.Tensor], weights: Sequence[float], s_seg: torch.Tensor | None = None
) -> torch.Tensor:
    """Step 3: ``v^(a) = s^(a) + sum_k p_k c_k^(a)``, summed in the order given (reproducible).

    Raises:
        ValueError: If there are no shards, or lengths disagree.
    """
    if len(shards) == 0:
        raise ValueError("aggregate needs at least one shard")
    if len(shards) != len(weights):
        raise ValueError(f"got {len(shards)} shards but {len(weights)} weights")
    n = shards[0].numel()
    v = torch.zeros_like(shards[0]) if s_seg is None else s_seg.clone()
    for shard, w in zip(shards, weights, strict=True):
        if shard.numel() != n:
            raise ValueError(f"shard lengths differ: {shard.numel()} vs {n}")
        v += w * shard
    return v


def apply_update(
    x_t: torch.Tensor, v: torch.Tensor, server_lr: float, public_shift: ShiftState | None
) -> torch.Tensor:
    """Step 4: ``x_{t+1} = x_t + lambda v`` from the reassembled ``v``; DSC's ``s`` moves."""
    if public_shift is not None:
        public_shift.track(v)
    return x_t + server_lr * v
