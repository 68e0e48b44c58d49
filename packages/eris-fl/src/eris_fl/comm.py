"""Communication accounting: bytes sent and received per node per round."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class Message:
    """One logical transfer of ``nbytes`` from node ``src`` to node ``dst``.

    ``kind`` is ``"shard"`` (client -> aggregator, the uplink), ``"broadcast"``
    (aggregated segment -> clients) or ``"model"`` (FedAvg server -> clients).
    """

    round: int
    src: str
    dst: str
    nbytes: int
    kind: str


class CommLedger:
    """Records every message of a run and answers load questions.

    A node's own shard (a client that is also an aggregator) is counted as if it were sent,
    so the aggregator's inbound load equals the formula ``K d q / A`` values; the bytes on
    the network are smaller by that one shard.

    Example:
        >>> ledger = CommLedger()
        >>> ledger.record(0, "client0", "server", 40, "shard")
        >>> ledger.max_inbound(0, kind="shard")
        40
    """

    def __init__(self) -> None:
        self.messages: list[Message] = []

    def record(self, round: int, src: str, dst: str, nbytes: int, kind: str) -> None:
        """Add one message."""
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        self.messages.append(Message(round, src, dst, int(nbytes), kind))

    def _select(self, round: int | None, kind: str | None) -> list[Message]:
        return [
            m
            for m in self.messages
            if (round is None or m.round == round) and (kind is None or m.kind == kind)
        ]

    def inbound(self, round: int | None = None, kind: str | None = None) -> dict[str, int]:
        """Bytes received per node (in one round, or summed over all)."""
        out: dict[str, int] = defaultdict(int)
        for m in self._select(round, kind):
            out[m.dst] += m.nbytes
        return dict(out)

    def outbound(self, round: int | None = None, kind: str | None = None) -> dict[str, int]:
        """Bytes sent per node (in one round, or summed over all)."""
        out: dict[str, int] = defaultdict(int)
        for m in self._select(round, kind):
            out[m.src] += m.nbytes
        return dict(out)

    def max_inbound(self, round: int | None = None, kind: str | None = None) -> int:
        """Largest inbound load of any node (the bottleneck)."""
        loads = self.inbound(round, kind)
        return max(loads.values()) if loads else 0

    def client_uplink(self, round: int | None = None) -> dict[str, int]:
        """Bytes each client sent as its update (``kind="shard"``)."""
        return self.outbound(round, kind="shard")

    @property
    def rounds(self) -> list[int]:
        """Rounds that have messages, sorted."""
        return sorted({m.round for m in self.messages})

    def __len__(self) -> int:
        return len(self.messages)
