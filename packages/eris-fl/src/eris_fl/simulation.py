"""Exact in-process simulator of ERIS: every client and aggregator in one process.

The round itself is :mod:`eris_fl._eris`; this module only holds the clients' data and state
and hands the messages from clients to aggregators.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
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
from eris_fl.client import LocalTrainer, UpdateFn
from eris_fl.comm import CommLedger
from eris_fl.config import ERISConfig
from eris_fl.dsc import ShiftState, resolve_alpha
from eris_fl.observers import ByteCounter, Observer, RoundView
from eris_fl.params import assign, flatten
from eris_fl.partition import ShardPartitioner

logger = logging.getLogger(__name__)


@dataclass
class History:
    """What a run returns: per-round metrics, the final state, and the bytes if counted."""

    metrics: list[dict[str, float]] = field(default_factory=list)
    params: torch.Tensor | None = None
    byte_counter: ByteCounter | None = None

    @property
    def ledger(self) -> CommLedger:
        """The communication ledger of the run.

        Raises:
            AttributeError: If the run did not count bytes (``count_bytes=False``).
        """
        if self.byte_counter is None:
            raise AttributeError("this run counted no bytes: pass count_bytes=True to count them")
        return self.byte_counter.ledger

    def last(self, key: str) -> float:
        """The last recorded value of metric ``key``.

        Raises:
            KeyError: If no round recorded it.
        """
        for row in reversed(self.metrics):
            if key in row:
                return row[key]
        raise KeyError(f"no round recorded metric {key!r}")


class ERISSimulator:
    """Runs ERIS rounds (:mod:`eris_fl._eris`) in one process, as the transports compute them.

    Without DSC the result is the FedAvg update for every ``A`` and partition; with DSC it
    is centralised DIANA-compressed FedAvg under the same compressor randomness. The ``A``
    shards are disjoint, so the simulator sums them in one pass over the whole vector: each
    coordinate gets exactly the sum its aggregator computes, in the same order.

    Args:
        model: The global model (its state is ``x_0``; it is updated in place each round).
        client_datasets: One dataset per client: ``(X, y)`` tensors, any
            ``torch.utils.data.Dataset``, a ``DataLoader``, or a callable yielding batches.
        config: :class:`~eris_fl.config.ERISConfig`.
        trainer: A :class:`~eris_fl.client.LocalTrainer` or ``f(model, x_t, data, gen) -> u``.
        eval_fn: Optional ``f(model) -> dict | float`` evaluated after each round.
        observers: Called with every round's :class:`~eris_fl.observers.RoundView`; a round
            without observers builds no view.

    Example:
        >>> import torch
        >>> from eris_fl import ERISConfig, ERISSimulator
        >>> X, y = torch.randn(40, 5), torch.randint(0, 3, (40,))
        >>> data = [(X[i::4], y[i::4]) for i in range(4)]
        >>> sim = ERISSimulator(torch.nn.Linear(5, 3), data, ERISConfig(num_aggregators=2))
        >>> sim.step()["round"]
        0.0
    """

    def __init__(
        self,
        model: nn.Module,
        client_datasets: Sequence[Any],
        config: ERISConfig,
        trainer: LocalTrainer | UpdateFn | None = None,
        eval_fn: EvalFn | None = None,
        observers: Sequence[Observer] = (),
    ) -> None:
        if not isinstance(config, ERISConfig):
            raise TypeError(f"config must be an ERISConfig, got {type(config).__name__}")
        self.model = model
        self.datasets = list(client_datasets)
        self.sizes = check_datasets(self.datasets)
        self.config = config
        self.update_fn = as_update_fn(trainer, config)
        self.eval_fn = eval_fn
        self.observers = list(observers)
        K = len(self.datasets)
        m = config.clients_per_round or K
        if config.clients_per_round is not None and m > K:
            raise ValueError(f"clients_per_round={m} exceeds the number of clients {K}")
        if config.num_aggregators > m:
            raise ValueError(
                f"num_aggregators={config.num_aggregators} must be <= the {m} participating clients"
            )
        self.x = flatten(model, config.trainable_only, config.include_buffers)
        self.d = self.x.numel()
        self.partitioner = ShardPartitioner(config.num_aggregators, config.partition, config.seed)
        self.round = 0
        self.client_shifts: list[ShiftState] = []
        self.public_shift: ShiftState | None = None
        if config.compressor is not None:
            alpha = resolve_alpha(config.shift_alpha, config.compressor, self.d)
            dt, dev = self.x.dtype, self.x.device
            self.client_shifts = [ShiftState(self.d, alpha, dtype=dt, device=dev) for _ in range(K)]
            self.public_shift = ShiftState(self.d, alpha, dtype=dt, device=dev)

    def step(
        self, trainer: LocalTrainer | UpdateFn | None = None, tap: Observer | None = None
    ) -> dict[str, float]:
        """Run one round; ``trainer`` overrides the default and ``tap`` observes, this round only.

        Returns:
            The round's metrics (``round`` plus what ``eval_fn`` returned).
        """
        cfg, t, d = self.config, self.round, self.d
        update_fn = self.update_fn if trainer is None else as_update_fn(trainer, cfg)
        observers = self.observers + ([tap] if tap is not None else [])
        plan = plan_round(cfg, self.sizes, t, d, self.partitioner)
        x_t = self.x
        updates: dict[int, torch.Tensor] = {}
        messages: dict[int, torch.Tensor] = {}
        for k in plan.clients:
            u = local_update(update_fn, self.model, x_t, self.datasets[k], cfg.seed, plan, k)
            shift = self.client_shifts[k] if self.client_shifts else None
            messages[k] = client_message(u, cfg.compressor, shift, cfg.seed, plan, k)
            if observers:
                updates[k] = u
        s = self.public_shift.shift if self.public_shift is not None else None
        v = aggregate_shard([messages[k] for k in plan.clients], plan.weights, s)
        x_next = apply_update(x_t, v, cfg.server_lr, self.public_shift)
        self.x = x_next
        assign(self.model, x_next, cfg.trainable_only, cfg.include_buffers)
        if observers:
            support = {k: message_support(cfg.compressor, d, cfg.seed, plan, k) for k in messages}
            view = RoundView(
                t, x_t, x_next.clone(), plan.clients, plan.aggregators, plan.weights,
                plan.owner.to(x_t.device), updates, messages, support, len(self.datasets),
            )  # fmt: skip
            for observer in observers:
                observer(view)
        self.round += 1
        row = evaluate(self.eval_fn, self.model, t)
        logger.info("ERIS round %d (A=%d): %s", t, cfg.num_aggregators, row)
        return row


def run_simulation(
    model: nn.Module,
    client_datasets: Sequence[Any],
    config: ERISConfig,
    rounds: int,
    trainer: LocalTrainer | UpdateFn | None = None,
    eval_fn: EvalFn | None = None,
    tap: Observer | None = None,
    progress: bool | None = None,
    count_bytes: bool = False,
) -> History:
    """Train ``model`` for ``rounds`` ERIS rounds in one process (see :class:`ERISSimulator`).

    Args:
        model: The global model, updated in place.
        client_datasets: One dataset, ``DataLoader`` or batch-yielding callable per client.
        config: :class:`~eris_fl.config.ERISConfig` (its ``seed`` drives all randomness).
        rounds: Number of rounds, ``>= 0``.
        trainer: Local work; default :class:`~eris_fl.client.LocalTrainer` (1 epoch SGD 0.1).
        eval_fn: Optional ``f(model) -> dict | float`` after each round.
        tap: Optional observer called with every :class:`~eris_fl.observers.RoundView`.
        progress: A bar over the rounds: ``None`` (default) on a terminal only, ``True``
            always, ``False`` never (``TQDM_DISABLE=1`` silences it).
        count_bytes: Attach a :class:`~eris_fl.observers.ByteCounter` (``History.ledger``).

    Returns:
        :class:`History` with metrics, the final state vector and (if counted) the ledger.

    Raises:
        ValueError: For a bad round count or any invalid input named in the config checks.

    Example:
        >>> import torch
        >>> from eris_fl import ERISConfig, run_simulation
        >>> X, y = torch.randn(40, 5), torch.randint(0, 3, (40,))
        >>> data = [(X[i::4], y[i::4]) for i in range(4)]
        >>> h = run_simulation(torch.nn.Linear(5, 3), data, ERISConfig(num_aggregators=2), 2)
        >>> len(h.metrics)
        2
    """
    from methodkit import progress as _progress

    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 0:
        raise ValueError(f"rounds must be an int >= 0, got {rounds!r}")
    counter = ByteCounter(config.compressor) if count_bytes else None
    observers = [o for o in (counter, tap) if o is not None]
    sim = ERISSimulator(model, client_datasets, config, trainer, eval_fn, observers)
    history = History(byte_counter=counter)
    for _ in _progress(range(rounds), enabled=progress, desc="ERIS rounds", total=rounds):
        history.metrics.append(sim.step())
    history.params = sim.x.clone()
    return history
