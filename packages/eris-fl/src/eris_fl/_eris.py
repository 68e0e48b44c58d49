"""Exact in-process simulator of ERIS: Federated Shard Aggregation (+ DSC).

This module mirrors the algorithm box of the paper (steps 1-6, see :class:`ERISSimulator`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from eris_fl._round import (
    EvalFn,
    as_update_fn,
    check_datasets,
    check_update,
    evaluate,
    participants,
    round_weights,
    select_aggregators,
)
from eris_fl._seeding import COMPRESS, LOCAL, derived_generator
from eris_fl.aggregator import ShardAggregator
from eris_fl.client import LocalTrainer, UpdateFn
from eris_fl.comm import CommLedger
from eris_fl.compress import BYTES_PER_VALUE, Compressor, TopK
from eris_fl.config import ERISConfig
from eris_fl.dsc import ShiftState, resolve_alpha
from eris_fl.params import assign, flatten
from eris_fl.partition import ShardPartitioner

logger = logging.getLogger(__name__)


@dataclass
class RoundView:
    """Everything that happened in one round, for observers and attack benchmarks.

    An aggregator ``a`` (client ``aggregators[a]``) only sees ``messages[k][owner == a]``
    (and, with a seeded compressor, ``support[k]``); ``updates`` holds the true ``u_k``
    and is there to score attacks, not something any party observes.
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


Tap = Callable[[RoundView], None]


@dataclass
class History:
    """What a run returns: per-round metrics, the communication ledger, the final state."""

    metrics: list[dict[str, float]] = field(default_factory=list)
    ledger: CommLedger = field(default_factory=CommLedger)
    params: torch.Tensor | None = None

    def last(self, key: str) -> float:
        """The last recorded value of metric ``key``.

        Raises:
            KeyError: If no round recorded it.
        """
        for row in reversed(self.metrics):
            if key in row:
                return row[key]
        raise KeyError(f"no round recorded metric {key!r}")


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


class ERISSimulator:
    r"""Runs ERIS rounds in one process, exactly as the distributed protocol computes them.

    Round ``t`` (global state ``x_t``, participants ``S_t``, weights ``p_k``):

    1. every ``k in S_t`` computes ``u_k`` from ``x_t`` (local epochs or one gradient);
    2. DSC (optional): ``c_k = C(u_k - h_k)``, ``h_k <- h_k + alpha c_k``; else ``c_k = u_k``;
    3. a shared-seed partition ``owner_t: {1..d} -> {1..A}`` gives disjoint masks ``m^(a)``;
    4. client ``k`` sends ``c_k * m^(a)`` to aggregator ``a`` (a client chosen this round);
    5. aggregator ``a`` computes ``v^(a) = s^(a) + sum_k p_k c_k^(a)`` and
       ``x_{t+1}^(a) = x_t^(a) + lambda v^(a)``, and broadcasts it;
    6. everybody reassembles ``x_{t+1} = sum_a m^(a) * x_{t+1}^(a)``; with DSC the public
       shift moves ``s <- s + alpha (v - s)``.

    .. math:: x_{t+1} = x_t + \lambda \Big(s_t + \sum_k p_k c_k\Big)

    Without DSC this is the FedAvg update for every ``A`` and partition; with DSC it is
    centralised DIANA-compressed FedAvg under the same compressor randomness.

    Args:
        model: The global model (its state is ``x_0``; it is updated in place each round).
        client_datasets: One dataset per client: ``(X, y)`` tensors, a ``TensorDataset`` or
            any ``torch.utils.data.Dataset``.
        config: :class:`~eris_fl.config.ERISConfig`.
        trainer: A :class:`~eris_fl.client.LocalTrainer` or ``f(model, x_t, data, gen) -> u``.
        eval_fn: Optional ``f(model) -> dict | float`` evaluated after each round.

    References:
        Fenoglio et al., "ERIS: Enhancing Privacy and Scalability in Federated Learning via
        Federated Shard Aggregation", arXiv:2602.08617, 2026. DSC follows DIANA
        (Mishchenko et al., "Distributed Learning with Compressed Gradient Differences", 2019).

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
    ) -> None:
        if not isinstance(config, ERISConfig):
            raise TypeError(f"config must be an ERISConfig, got {type(config).__name__}")
        self.model = model
        self.datasets = list(client_datasets)
        self.sizes = check_datasets(self.datasets)
        self.config = config
        self.update_fn = as_update_fn(trainer, config)
        self.eval_fn = eval_fn
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
        self.aggregators = [ShardAggregator(a) for a in range(config.num_aggregators)]
        self.ledger = CommLedger()
        self.round = 0
        self.client_shifts: list[ShiftState] = []
        self.public_shift: ShiftState | None = None
        if config.compressor is not None:
            alpha = resolve_alpha(config.shift_alpha, config.compressor, self.d)
            kw = {"dtype": self.x.dtype, "device": self.x.device}
            self.client_shifts = [ShiftState(self.d, alpha, **kw) for _ in range(K)]
            self.public_shift = ShiftState(self.d, alpha, **kw)

    def step(
        self, trainer: LocalTrainer | UpdateFn | None = None, tap: Tap | None = None
    ) -> dict[str, float]:
        """Run one round; ``trainer`` overrides the default for this round only.

        Returns:
            The round's metrics (``round`` plus what ``eval_fn`` returned).
        """
        cfg, t, d = self.config, self.round, self.d
        update_fn = self.update_fn if trainer is None else as_update_fn(trainer, cfg)
        clients = participants(len(self.datasets), cfg.clients_per_round, cfg.seed, t)
        aggs = select_aggregators(
            cfg.aggregator_selection, cfg.num_aggregators, clients, cfg.seed, t
        )
        p = round_weights(cfg.weights, self.sizes, clients)
        x_t = self.x
        # Steps 1-2: local work and (optional) shifted compression.
        updates: dict[int, torch.Tensor] = {}
        messages: dict[int, torch.Tensor] = {}
        support: dict[int, torch.Tensor | None] = {}
        for k in clients:
            gen = derived_generator(cfg.seed, t, k, LOCAL)
            u = update_fn(self.model, x_t.clone(), self.datasets[k], gen)
            updates[k] = check_update(u, d, k, t).detach()
            if cfg.compressor is None:
                messages[k], support[k] = updates[k], None
            else:
                comp_seed = (cfg.seed, t, k, COMPRESS)
                messages[k] = self.client_shifts[k].step(
                    updates[k], cfg.compressor, derived_generator(*comp_seed)
                )
                support[k] = cfg.compressor.support(d, derived_generator(*comp_seed))
        # Step 3: the shared partition of the coordinates.
        owner = self.partitioner.owner(t, d).to(x_t.device)
        x_next = x_t.clone()
        v = torch.zeros_like(x_t)
        s = self.public_shift.shift if self.public_shift is not None else None
        for a, agg in enumerate(self.aggregators):
            idx = (owner == a).nonzero().squeeze(1)
            # Step 4: each client sends its shard to aggregator a.
            shards = [messages[k][idx] for k in clients]
            for k, shard in zip(clients, shards, strict=True):
                sup = support[k][idx.cpu()] if support[k] is not None else None
                nbytes = shard_bytes(cfg.compressor, shard, sup)
                self.ledger.record(t, f"client{k}", f"client{aggs[a]}", nbytes, "shard")
            # Step 5: aggregate the shard and take the step on it.
            v_seg = agg.aggregate(shards, p, None if s is None else s[idx])
            x_next[idx] = x_t[idx] + cfg.server_lr * v_seg
            v[idx] = v_seg
            for k in range(len(self.datasets)):
                if k != aggs[a]:
                    nbytes = BYTES_PER_VALUE * idx.numel()
                    self.ledger.record(t, f"client{aggs[a]}", f"client{k}", nbytes, "broadcast")
        # Step 6: reassembly (x_next already holds every segment) and the public shift.
        if self.public_shift is not None:
            self.public_shift.track(v)
        self.x = x_next
        assign(self.model, x_next, cfg.trainable_only, cfg.include_buffers)
        if tap is not None:
            tap(
                RoundView(
                    t, x_t, x_next.clone(), clients, aggs, p, owner, updates, messages, support
                )
            )
        self.round += 1
        logger.debug("round %d done (A=%d, %d clients)", t, cfg.num_aggregators, len(clients))
        return evaluate(self.eval_fn, self.model, t)


def run_simulation(
    model: nn.Module,
    client_datasets: Sequence[Any],
    config: ERISConfig,
    rounds: int,
    trainer: LocalTrainer | UpdateFn | None = None,
    eval_fn: EvalFn | None = None,
    tap: Tap | None = None,
    progress: bool = False,
) -> History:
    """Train ``model`` for ``rounds`` ERIS rounds in one process (see :class:`ERISSimulator`).

    Args:
        model: The global model, updated in place.
        client_datasets: One dataset per client.
        config: :class:`~eris_fl.config.ERISConfig` (its ``seed`` drives all randomness).
        rounds: Number of rounds, ``>= 0``.
        trainer: Local work; default :class:`~eris_fl.client.LocalTrainer` (1 epoch SGD 0.1).
        eval_fn: Optional ``f(model) -> dict | float`` after each round.
        tap: Optional observer called with every :class:`RoundView`.
        progress: Show a progress bar.

    Returns:
        :class:`History` with metrics, ledger and the final state vector.

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
    sim = ERISSimulator(model, client_datasets, config, trainer, eval_fn)
    history = History(ledger=sim.ledger)
    for _ in _progress(range(rounds), enabled=progress, desc="ERIS rounds"):
        history.metrics.append(sim.step(tap=tap))
    history.params = sim.x.clone()
    return history
