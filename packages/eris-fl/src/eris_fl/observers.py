"""Observers of a simulated round: byte accounting and attack taps, attached only when asked.

A round with no observer computes the messages and the update and nothing else; an observer
receives a :class:`RoundView` (the plan, the true updates, the messages and the compressor's
supports) after the round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from eris_fl._eris import SERVER
from eris_fl.comm import CommLedger
from eris_fl.compress import BYTES_PER_VALUE, Compressor, TopK


@dataclass
class RoundView:
    """Everything that happened in one round, for observers and attack benchmarks.

    An aggregator ``a`` (client ``aggregators[a]``, or ``-1`` for the FedAvg server) only
    sees ``messages[k][owner == a]`` (and, with a seeded compressor, ``support[k]``);
    ``updates`` holds the true ``u_k`` and is there to score attacks, not something any
    party observes.
    """

    round: int
    x_t: torch.Tensor
    x_next: torch.Tensor
    clients: list[int]
    aggregators: list[int]
    weights: list[float]
    owner: torch.Tensor
    updates: dict[int, torch.Tensor]
    messages: dict[int, torch.Tensor]
    support: dict[int, torch.Tensor | None]
    num_clients: int = 0


#: An observer: called with the :class:`RoundView` of every round.
Observer = Callable[[RoundView], None]


def shard_bytes(
    compressor: Compressor | None, c_shard: torch.Tensor, sup: torch.Tensor | None
) -> int:
    """Bytes one client sends for one shard (values only; seeded indices are not sent)."""
    n = c_shard.numel()
    if compressor is None:
        return BYTES_PER_VALUE * n
    if sup is not None:
        per = 1 if getattr(compressor, "seeded_indices", True) else 2
        return BYTES_PER_VALUE * per * int(sup.sum())
    if isinstance(compressor, TopK):
        return 2 * BYTES_PER_VALUE * int((c_shard != 0).sum())
    return compressor.payload_bytes(n) if n else 0


class ByteCounter:
    """Records each round's messages in a :class:`~eris_fl.comm.CommLedger`.

    ERIS: every client's shard ``a`` goes to the client aggregating it (``"shard"``), which
    sends its segment to every other client (``"broadcast"``). FedAvg (aggregator ``-1``):
    every update goes to ``"server"``, which sends the whole model back (``"model"``).

    Args:
        compressor: The run's compressor (it decides the payload of a shard).
        ledger: Where to record (a new one by default).
    """

    def __init__(self, compressor: Compressor | None, ledger: CommLedger | None = None) -> None:
        self.compressor = compressor
        self.ledger = ledger if ledger is not None else CommLedger()

    def __call__(self, view: RoundView) -> None:
        """Record the messages of ``view``."""
        t, d = view.round, view.x_t.numel()
        if view.aggregators == [SERVER]:
            for k in view.clients:
                nbytes = shard_bytes(self.compressor, view.messages[k], view.support[k])
                self.ledger.record(t, f"client{k}", "server", nbytes, "shard")
            for k in range(view.num_clients):
                self.ledger.record(t, "server", f"client{k}", BYTES_PER_VALUE * d, "model")
            return
        for a, agg in enumerate(view.aggregators):
            idx = (view.owner == a).nonzero().squeeze(1)
            for k in view.clients:
                sup = view.support[k]
                sup = sup[idx.cpu()] if sup is not None else None
                nbytes = shard_bytes(self.compressor, view.messages[k][idx], sup)
                self.ledger.record(t, f"client{k}", f"client{agg}", nbytes, "shard")
            for k in range(view.num_clients):
                if k != agg:
                    nbytes = BYTES_PER_VALUE * idx.numel()
                    self.ledger.record(t, f"client{agg}", f"client{k}", nbytes, "broadcast")
