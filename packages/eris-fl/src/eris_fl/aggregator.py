"""One client acting as the aggregator of one shard (step 5)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from eris_fl._eris import aggregate_shard


class ShardAggregator:
    """Sums the shard it owns: ``v^(a) = s^(a) + sum_k p_k c_k^(a)``.

    It only ever receives the coordinates ``owner_t = a`` of each client's message, so it
    sees about ``1/A`` of every update.

    Args:
        index: Aggregator index ``a`` in ``0..A-1``.
    """

    def __init__(self, index: int) -> None:
        if index < 0:
            raise ValueError(f"index must be >= 0, got {index}")
        self.index: int = index

    def aggregate(
        self,
        shards: Sequence[torch.Tensor],
        weights: Sequence[float],
        s_seg: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Return ``v^(a)``; clients are summed in the order given (fixed order = reproducible).

        Args:
            shards: ``c_k^(a)`` for the participating clients, all of one length.
            weights: ``p_k``, one per shard.
            s_seg: The public shift on this shard (``None`` without DSC).

        Raises:
            ValueError: If lengths disagree or there are no shards.
        """
        return aggregate_shard(shards, weights, s_seg)
