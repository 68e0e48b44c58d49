"""Flower relay adapter (needs ``flwr``, not a declared extra in 0.1.0; see below).

Flower's Message API only routes ServerApp <-> ClientApp, so client-to-client shard
transfer must pass through the server. In relay mode the ServerApp assigns the aggregator
roles of each round and forwards every client's shards to the ClientApp that aggregates
them; it gives ERIS's load balancing (no node sums more than ~1/A of the traffic) but
**the relay sees every shard, so it offers none of ERIS's protection against an honest-but-
curious server**. Use :mod:`eris_fl.distributed` (gloo point-to-point) for that.

:class:`FlowerRelay` holds the framework-independent logic of relay mode (roles, shard
splitting, routing, aggregation, reassembly), tested against the simulator. The Flower
ServerApp/ClientApp glue is not written yet: :func:`require_flwr` raises a clear
``ImportError`` when ``flwr`` is missing. ``flwr`` is not a declared extra of this version:
adding ``flwr>=1.20`` to the shared lock resolved (flwr 1.42.0, torch/numpy unchanged) but
Flower's in-process simulation needs Ray (``flwr[simulation]``), so it could not be tested
offline here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

import torch

from eris_fl._round import participants, round_weights, select_aggregators
from eris_fl.aggregator import ShardAggregator
from eris_fl.config import ERISConfig
from eris_fl.partition import ShardPartitioner


def require_flwr() -> ModuleType:
    """Import and return ``flwr``.

    Raises:
        ImportError: If Flower is not installed, naming what to install.
    """
    try:
        import flwr
    except ImportError as exc:
        raise ImportError(
            "the Flower relay adapter needs Flower: pip install 'flwr>=1.20' "
            "(eris-fl 0.1.0 declares no 'flwr' extra; in-process tests need flwr[simulation], "
            "i.e. Ray)"
        ) from exc
    return flwr


@dataclass(frozen=True)
class RoundRoles:
    """Who takes part in a round, who aggregates which shard, and the weights."""

    clients: list[int]
    aggregators: list[int]
    weights: list[float]


class FlowerRelay:
    """The relay-mode protocol, independent of Flower's transport.

    Args:
        config: :class:`~eris_fl.config.ERISConfig` without DSC (relay mode shares no shift).
        sizes: Number of examples of each client (for ``weights="samples"``).

    Raises:
        NotImplementedError: If the config uses DSC.
    """

    def __init__(self, config: ERISConfig, sizes: Sequence[int]) -> None:
        if config.uses_dsc:
            raise NotImplementedError("the Flower relay supports FSA without DSC only")
        self.config = config
        self.sizes = [int(n) for n in sizes]
        self.partitioner = ShardPartitioner(config.num_aggregators, config.partition, config.seed)

    def roles(self, round: int) -> RoundRoles:
        """Participants, aggregators (client ids) and weights of ``round``."""
        cfg = self.config
        clients = participants(len(self.sizes), cfg.clients_per_round, cfg.seed, round)
        aggs = select_aggregators(
            cfg.aggregator_selection, cfg.num_aggregators, clients, cfg.seed, round
        )
        return RoundRoles(clients, aggs, round_weights(cfg.weights, self.sizes, clients))

    def _indices(self, round: int, d: int) -> list[torch.Tensor]:
        owner = self.partitioner.owner(round, d)
        return [(owner == a).nonzero().squeeze(1) for a in range(self.config.num_aggregators)]

    def split(self, round: int, c: torch.Tensor) -> list[torch.Tensor]:
        """Client side: cut a message into its ``A`` shards."""
        return [c[idx] for idx in self._indices(round, c.numel())]

    def route(
        self, round: int, shards_by_client: dict[int, list[torch.Tensor]]
    ) -> dict[int, list[torch.Tensor]]:
        """Relay: the shards each aggregator client receives, in participant order."""
        roles = self.roles(round)
        return {
            agg: [shards_by_client[k][a] for k in roles.clients]
            for a, agg in enumerate(roles.aggregators)
        }

    def aggregate(self, round: int, shards: Sequence[torch.Tensor]) -> torch.Tensor:
        """Aggregator side: ``v^(a) = sum_k p_k c_k^(a)``."""
        return ShardAggregator(0).aggregate(shards, self.roles(round).weights)

    def reassemble(
        self, round: int, x_t: torch.Tensor, segments: Sequence[torch.Tensor]
    ) -> torch.Tensor:
        """Everybody: ``x_{t+1} = x_t + lambda v`` from the ``A`` aggregated segments."""
        x_next = x_t.clone()
        for idx, v_seg in zip(self._indices(round, x_t.numel()), segments, strict=True):
            x_next[idx] = x_t[idx] + self.config.server_lr * v_seg
        return x_next
