"""The torch.distributed transport (gloo over TCP): one rank per client, ERIS's round in between.

Per round every participating rank computes its message ``c_k`` (:mod:`eris_fl._eris`); in
``comm="p2p"`` mode (default, faithful to the threat model) rank ``k`` sends its shard
``c_k[owner == a]`` with ``isend`` to the rank that aggregates shard ``a``, which alone sums
it; in ``comm="collective"`` mode a ``dist.reduce(dst=aggregator)`` does the sum, faster, but
gloo's reduction tree lets intermediate ranks see partial sums (a performance mode). Each
aggregator then ``broadcast``s its segment ``v^(a)`` and every rank applies the update.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from eris_fl._checks import EvalFn, as_update_fn, check_datasets, evaluate
from eris_fl._eris import (
    RoundPlan,
    aggregate_shard,
    apply_update,
    client_message,
    local_update,
    plan_round,
)
from eris_fl.client import LocalTrainer, UpdateFn
from eris_fl.config import ERISConfig
from eris_fl.dsc import ShiftState, resolve_alpha
from eris_fl.params import assign, flatten
from eris_fl.partition import ShardPartitioner
from eris_fl.simulation import History
from methodkit import progress as show_progress

logger = logging.getLogger(__name__)

COMM_MODES = ("p2p", "collective")
ModelFn = Callable[[], nn.Module]
DatasetFn = Callable[[int], Any]
#: Called by a rank with ``(rank, round, stage)``: stage ``"train"`` when its local work
#: starts, ``"exchange"`` when its shards go out, ``"done"`` when the round is applied.
RoundHook = Callable[[int, int, str], None]


def _posted(work: dist.Work | None) -> dist.Work:
    """A point-to-point request; torch returns None only to a rank outside the group."""
    if work is None:
        raise RuntimeError("this rank is not in the default process group")
    return work


def exchange_shard(
    comm: str,
    rank: int,
    c: torch.Tensor | None,
    plan: RoundPlan,
    a: int,
    s_seg: torch.Tensor | None,
    dtype: torch.dtype,
) -> torch.Tensor | None:
    """Move shard ``a`` to its aggregator; return ``v^(a)`` on the aggregator, else None."""
    idx, agg_rank, clients, p = plan.shards[a], plan.aggregators[a], plan.clients, plan.weights
    if comm == "collective":
        buf = torch.zeros(idx.numel(), dtype=dtype)
        if c is not None:
            buf = p[clients.index(rank)] * c[idx]
        dist.reduce(buf, dst=agg_rank)
        if rank != agg_rank:
            return None
        return buf if s_seg is None else s_seg + buf
    reqs = []
    if c is not None and rank != agg_rank:
        reqs.append(_posted(dist.isend(c[idx].contiguous(), dst=agg_rank)))
    v = None
    if rank == agg_rank:
        shards, pending = [], []
        for k in clients:
            if k == rank:
                assert c is not None  # a participating client always has its message
                shards.append(c[idx])
            else:
                buf = torch.empty(idx.numel(), dtype=dtype)
                pending.append(_posted(dist.irecv(buf, src=k)))
                shards.append(buf)
        for req in pending:
            req.wait()
        v = aggregate_shard(shards, p, s_seg)
    for req in reqs:
        req.wait()
    return v


def run_worker(
    rank: int,
    world_size: int,
    model_fn: ModelFn,
    dataset_fn: DatasetFn,
    config: ERISConfig,
    rounds: int,
    trainer: LocalTrainer | UpdateFn | None = None,
    comm: str = "p2p",
    init_method: str | None = None,
    timeout_s: float = 120.0,
    eval_fn: EvalFn | None = None,
    on_round: RoundHook | None = None,
    progress: bool | None = None,
) -> History:
    """Run one client (one rank) of an ERIS training; return its :class:`~eris_fl.History`.

    Joins the process group if none exists (``init_method`` default ``"env://"``, as set
    by ``torchrun``), and leaves it again at the end in that case.

    Args:
        rank: This process's rank = client id.
        world_size: Number of ranks = clients.
        model_fn: Zero-argument callable building the model (rank 0's initial state is
            broadcast, so it need not be seeded).
        dataset_fn: ``f(rank) -> dataset`` of this client (a dataset, ``DataLoader`` or a
            callable yielding batches).
        config: :class:`~eris_fl.config.ERISConfig` (same on every rank).
        rounds: Number of rounds.
        trainer: Local work, as in :func:`~eris_fl.run_simulation`.
        comm: ``"p2p"`` or ``"collective"``.
        init_method: ``torch.distributed`` init method (``tcp://host:port`` or ``env://``).
        timeout_s: Timeout of every collective (a dead peer fails the run after this).
        eval_fn: ``f(model) -> dict | float``, run on rank 0 after each round (logged there).
        on_round: Called with ``(rank, round, stage)`` as the rank moves through a round.
        progress: A bar over the rounds on rank 0: ``None`` (default) on a terminal only,
            ``True`` always, ``False`` never.

    Returns:
        The history: per-round metrics (``eval_fn``'s on rank 0) and the final flat state
        (also assigned into the rank's model).

    Raises:
        ValueError: Bad ``comm``, or ``world_size`` not matching the process group.
    """
    if comm not in COMM_MODES:
        raise ValueError(f"comm must be one of {COMM_MODES}, got {comm!r}")
    own_group = not dist.is_initialized()
    if own_group:
        dist.init_process_group(
            "gloo",
            init_method=init_method or "env://",
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
    try:
        if dist.get_world_size() != world_size or dist.get_rank() != rank:
            raise ValueError(
                f"world_size/rank mismatch: process group has world_size="
                f"{dist.get_world_size()}, rank={dist.get_rank()}, got {world_size}, {rank}"
            )
        model = model_fn()
        update_fn = as_update_fn(trainer, config)
        run = _RankRun(rank, world_size, model, dataset_fn(rank), config, comm)
        history = History()
        steps = show_progress(
            range(rounds), enabled=progress if rank == 0 else False,  # one bar, on rank 0
            desc=f"ERIS rounds (gloo, {world_size} ranks)", total=rounds,
        )  # fmt: skip
        for t in steps:
            try:
                run.round(update_fn, t, on_round)
            except Exception as exc:
                exc.add_note(f"(rank {rank}, round {t})")
                raise
            row = evaluate(eval_fn if rank == 0 else None, model, t)
            history.metrics.append(row)
            if rank == 0:
                logger.info("ERIS round %d (gloo, %d ranks): %s", t, world_size, row)
            if on_round is not None:
                on_round(rank, t, "done")
        history.params = run.x
        return history
    finally:
        if own_group:
            dist.destroy_process_group()


class _RankRun:
    """One rank's state across rounds: its data, its model, its DSC shift, the public shift."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        model: nn.Module,
        data: Any,
        config: ERISConfig,
        comm: str,
    ) -> None:
        cfg = config
        m = cfg.clients_per_round or world_size
        if m > world_size or cfg.num_aggregators > m:
            raise ValueError(
                f"num_aggregators={cfg.num_aggregators} must be <= the {min(m, world_size)} "
                f"participating clients (world_size={world_size})"
            )
        self.rank, self.model, self.data, self.config, self.comm = rank, model, data, cfg, comm
        x = flatten(model, cfg.trainable_only, cfg.include_buffers).cpu()
        dist.broadcast(x, src=0)  # everybody starts from rank 0's initial state
        self.x, self.d = x, x.numel()
        n_local = check_datasets([data], client_ids=[rank])[0]
        sizes_t = [torch.zeros(1, dtype=torch.long) for _ in range(world_size)]
        dist.all_gather(sizes_t, torch.tensor([n_local], dtype=torch.long))
        self.sizes = [int(s) for s in sizes_t]
        self.partitioner = ShardPartitioner(cfg.num_aggregators, cfg.partition, cfg.seed)
        self.shift = self.public = None
        if cfg.compressor is not None:
            alpha = resolve_alpha(cfg.shift_alpha, cfg.compressor, self.d)
            self.shift = ShiftState(self.d, alpha, dtype=x.dtype)
            self.public = ShiftState(self.d, alpha, dtype=x.dtype)

    def round(self, update_fn: UpdateFn, t: int, hook: RoundHook | None = None) -> None:
        """Round ``t``: message, shard exchange, broadcast of the segments, update."""
        cfg, rank, x = self.config, self.rank, self.x
        plan = plan_round(cfg, self.sizes, t, self.d, self.partitioner)
        c = None
        if rank in plan.clients:
            if hook is not None:
                hook(rank, t, "train")
            u = local_update(update_fn, self.model, x, self.data, cfg.seed, plan, rank).cpu()
            c = client_message(u, cfg.compressor, self.shift, cfg.seed, plan, rank)
        if hook is not None:
            hook(rank, t, "exchange")
        v = torch.zeros_like(x)
        for a, idx in enumerate(plan.shards):
            s_seg = None if self.public is None else self.public.shift[idx]
            v_seg = exchange_shard(self.comm, rank, c, plan, a, s_seg, x.dtype)
            buf = v_seg if v_seg is not None else torch.empty(idx.numel(), dtype=x.dtype)
            dist.broadcast(buf, src=plan.aggregators[a])
            v[idx] = buf
        self.x = apply_update(x, v, cfg.server_lr, self.public)
        assign(self.model, self.x, cfg.trainable_only, cfg.include_buffers)
