r"""The real multi-process / multi-host engine on ``torch.distributed`` (gloo over TCP).

Every rank is one client. Per round each participating rank computes its message ``c_k``;
in ``comm="p2p"`` mode (default, faithful to the threat model) rank ``k`` sends its shard
``c_k[owner == a]`` with ``isend`` to the rank that aggregates shard ``a``, which alone sums
it; in ``comm="collective"`` mode a ``dist.reduce(dst=aggregator)`` does the sum, faster but
gloo's reduction tree lets intermediate ranks see partial sums (a performance mode).
Each aggregator then ``broadcast``s its segment ``v^(a)`` and every rank reassembles
``x_{t+1} = x_t + lambda v``. The arithmetic is that of
:class:`~eris_fl.ERISSimulator`, so both give the same parameters.

Multi-host with ``torchrun`` (reads ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``)::

    torchrun --nnodes 2 --nproc-per-node 4 --rdzv-endpoint host:29500 \\
        -m eris_fl.distributed --config cfg.toml

with ``cfg.toml``::

    model = "mypkg.models:make_model"      # zero-argument callable -> nn.Module
    data = "mypkg.data:client_dataset"     # f(rank) -> that client's dataset
    rounds = 20
    comm = "p2p"
    out = "final_state.pt"                 # rank 0 saves the final state vector here
    [eris]                                 # ERISConfig fields; compressor = {randk = 0.1}
    num_aggregators = 4
    [trainer]                              # LocalTrainer: SGD lr, local_epochs, batch_size
    lr = 0.1
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import logging
import os
import socket
import tempfile
import time
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from eris_fl._round import (
    as_update_fn,
    check_datasets,
    check_update,
    participants,
    round_weights,
    select_aggregators,
)
from eris_fl._seeding import COMPRESS, LOCAL, derived_generator
from eris_fl.aggregator import ShardAggregator
from eris_fl.client import LocalTrainer, UpdateFn
from eris_fl.compress import Compressor, RandK, StochasticQuant
from eris_fl.config import ERISConfig
from eris_fl.dsc import ShiftState, resolve_alpha
from eris_fl.params import assign, flatten
from eris_fl.partition import ShardPartitioner

logger = logging.getLogger(__name__)

COMM_MODES = ("p2p", "collective")
ModelFn = Callable[[], nn.Module]
DatasetFn = Callable[[int], Any]


def _exchange(
    comm: str,
    rank: int,
    c: torch.Tensor | None,
    idx: torch.Tensor,
    agg_rank: int,
    clients: list[int],
    p: list[float],
    s_seg: torch.Tensor | None,
    agg: ShardAggregator,
) -> torch.Tensor | None:
    """Move shard ``a`` to its aggregator; return ``v^(a)`` on the aggregator, else None."""
    if comm == "collective":
        buf = torch.zeros(idx.numel(), dtype=torch.float64 if c is None else c.dtype)
        if c is not None:
            buf = p[clients.index(rank)] * c[idx]
        dist.reduce(buf, dst=agg_rank)
        if rank != agg_rank:
            return None
        return buf if s_seg is None else s_seg + buf
    reqs = []
    if c is not None and rank != agg_rank:
        reqs.append(dist.isend(c[idx].contiguous(), dst=agg_rank))
    v = None
    if rank == agg_rank:
        shards = []
        pending = []
        for k in clients:
            if k == rank:
                shards.append(c[idx])  # type: ignore[index]
            else:
                buf = torch.empty(idx.numel(), dtype=c.dtype if c is not None else torch.float32)
                pending.append(dist.irecv(buf, src=k))
                shards.append(buf)
        for req in pending:
            req.wait()
        v = agg.aggregate(shards, p, s_seg)
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
) -> torch.Tensor:
    """Run one client (one rank) of an ERIS training; return the final state vector.

    Joins the process group if none exists (``init_method`` default ``"env://"``, as set
    by ``torchrun``), and leaves it again at the end in that case.

    Args:
        rank: This process's rank = client id.
        world_size: Number of ranks = clients.
        model_fn: Zero-argument callable building the model (rank 0's initial state is
            broadcast, so it need not be seeded).
        dataset_fn: ``f(rank) -> dataset`` of this client.
        config: :class:`~eris_fl.config.ERISConfig` (same on every rank).
        rounds: Number of rounds.
        trainer: Local work, as in :func:`~eris_fl.run_simulation`.
        comm: ``"p2p"`` or ``"collective"``.
        init_method: ``torch.distributed`` init method (``tcp://host:port`` or ``env://``).
        timeout_s: Timeout of every collective (a dead peer fails the run after this).

    Returns:
        The final flat state (also assigned into the rank's model).

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
        return _train(rank, world_size, model_fn, dataset_fn, config, rounds, trainer, comm)
    finally:
        if own_group:
            dist.destroy_process_group()


def _train(
    rank: int,
    world_size: int,
    model_fn: ModelFn,
    dataset_fn: DatasetFn,
    config: ERISConfig,
    rounds: int,
    trainer: LocalTrainer | UpdateFn | None,
    comm: str,
) -> torch.Tensor:
    cfg = config
    m = cfg.clients_per_round or world_size
    if m > world_size or cfg.num_aggregators > m:
        raise ValueError(
            f"num_aggregators={cfg.num_aggregators} must be <= the {min(m, world_size)} "
            f"participating clients (world_size={world_size})"
        )
    model = model_fn()
    data = dataset_fn(rank)
    update_fn = as_update_fn(trainer, cfg)
    x = flatten(model, cfg.trainable_only, cfg.include_buffers).cpu()
    dist.broadcast(x, src=0)  # everybody starts from rank 0's initial state
    d = x.numel()
    n_local = check_datasets([data])[0]
    sizes_t = [torch.zeros(1, dtype=torch.long) for _ in range(world_size)]
    dist.all_gather(sizes_t, torch.tensor([n_local], dtype=torch.long))
    sizes = [int(s) for s in sizes_t]
    part = ShardPartitioner(cfg.num_aggregators, cfg.partition, cfg.seed)
    aggregators = [ShardAggregator(a) for a in range(cfg.num_aggregators)]
    shift = public = None
    if cfg.compressor is not None:
        alpha = resolve_alpha(cfg.shift_alpha, cfg.compressor, d)
        shift = ShiftState(d, alpha, dtype=x.dtype)
        public = ShiftState(d, alpha, dtype=x.dtype)
    for t in range(rounds):
        clients = participants(world_size, cfg.clients_per_round, cfg.seed, t)
        aggs = select_aggregators(
            cfg.aggregator_selection, cfg.num_aggregators, clients, cfg.seed, t
        )
        p = round_weights(cfg.weights, sizes, clients)
        c = None
        if rank in clients:
            u = update_fn(model, x.clone(), data, derived_generator(cfg.seed, t, rank, LOCAL))
            u = check_update(u, d, rank, t).detach().cpu()
            if shift is not None and cfg.compressor is not None:
                gen = derived_generator(cfg.seed, t, rank, COMPRESS)
                c = shift.step(u, cfg.compressor, gen)
            else:
                c = u
        owner = part.owner(t, d)
        v = torch.zeros_like(x)
        for a in range(cfg.num_aggregators):
            idx = (owner == a).nonzero().squeeze(1)
            s_seg = None if public is None else public.shift[idx]
            v_seg = _exchange(comm, rank, c, idx, aggs[a], clients, p, s_seg, aggregators[a])
            buf = v_seg if v_seg is not None else torch.empty(idx.numel(), dtype=x.dtype)
            dist.broadcast(buf, src=aggs[a])
            v[idx] = buf
        x_next = x.clone()
        for a in range(cfg.num_aggregators):
            idx = (owner == a).nonzero().squeeze(1)
            x_next[idx] = x[idx] + cfg.server_lr * v[idx]
        if public is not None:
            public.track(v)
        x = x_next
        assign(model, x, cfg.trainable_only, cfg.include_buffers)
        logger.debug("rank %d finished round %d", rank, t)
    return x


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _check_port(port: int, host: str = "127.0.0.1") -> int:
    if port == 0:
        return free_port(host)
    if not 0 < port < 65536:
        raise ValueError(f"port must be 0 (auto-pick) or in 1..65535, got {port}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise ValueError(
                f"port {port} on {host} is in use; pass port=0 to auto-pick a free port"
            ) from exc
    return port


def _entry(
    rank: int,
    world_size: int,
    port: int,
    out_dir: str,
    model_fn: ModelFn,
    dataset_fn: DatasetFn,
    config: ERISConfig,
    rounds: int,
    trainer: LocalTrainer | UpdateFn | None,
    comm: str,
    timeout_s: float,
    threads: int,
) -> None:
    torch.set_num_threads(threads)
    try:
        x = run_worker(
            rank,
            world_size,
            model_fn,
            dataset_fn,
            config,
            rounds,
            trainer,
            comm,
            init_method=f"tcp://127.0.0.1:{port}",
            timeout_s=timeout_s,
        )
    except BaseException as exc:
        # Written before the process dies, so the parent can name the root cause even when
        # another rank's "connection closed by peer" error is the one torch reports first.
        (Path(out_dir) / f"rank{rank}.err").write_text(f"{type(exc).__name__}: {exc}")
        raise
    torch.save(x, Path(out_dir) / f"rank{rank}.pt")


def _prewarm() -> None:
    """Take one throw-away optimizer step so that forked ranks inherit torch's lazy imports.

    The first ``optimizer.step()`` of a process imports ``torch._dynamo`` (~10-20 s on a
    busy 2-core machine); done once here, every forked rank starts warm.
    """
    weight = nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([weight], lr=0.0)
    weight.sum().backward()
    opt.step()


def launch_local(
    world_size: int,
    model_fn: ModelFn,
    dataset_fn: DatasetFn,
    config: ERISConfig,
    rounds: int,
    trainer: LocalTrainer | UpdateFn | None = None,
    comm: str = "p2p",
    port: int = 0,
    timeout_s: float = 120.0,
    start_method: str = "fork",
    threads: int = 1,
) -> torch.Tensor:
    """Run ``world_size`` client processes on this machine over gloo on 127.0.0.1.

    Args:
        world_size: Number of clients (processes), ``>= 1``.
        model_fn: Zero-argument model builder (picklable if ``start_method="spawn"``).
        dataset_fn: ``f(rank) -> dataset``.
        config: :class:`~eris_fl.config.ERISConfig`.
        rounds: Number of rounds.
        trainer: Local work (default :class:`~eris_fl.client.LocalTrainer`).
        comm: ``"p2p"`` or ``"collective"``.
        port: TCP port of the rendezvous; ``0`` picks a free one.
        timeout_s: Wall-clock limit for the whole run and for each collective.
        start_method: ``"fork"`` (fast, Linux) or ``"spawn"``.
        threads: torch threads per process.

    Returns:
        The final flat state (identical on every rank; checked).

    Raises:
        ValueError: Bad arguments, or ``port`` in use (use ``port=0``).
        RuntimeError: A rank failed (the others are stopped), or ranks disagree.
        TimeoutError: The run exceeded ``timeout_s``.
    """
    import torch.multiprocessing as mp

    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if comm not in COMM_MODES:
        raise ValueError(f"comm must be one of {COMM_MODES}, got {comm!r}")
    m = config.clients_per_round or world_size
    if m > world_size or config.num_aggregators > m:
        raise ValueError(
            f"num_aggregators={config.num_aggregators} must be <= the participating clients "
            f"(world_size={world_size}, clients_per_round={config.clients_per_round})"
        )
    port = _check_port(port)
    if start_method == "fork":
        _prewarm()
    with tempfile.TemporaryDirectory(prefix="eris_fl_") as out_dir:
        args = (world_size, port, out_dir, model_fn, dataset_fn, config, rounds, trainer, comm)
        ctx = mp.start_processes(
            _entry,
            args=(*args, timeout_s, threads),
            nprocs=world_size,
            join=False,
            start_method=start_method,
        )
        deadline = time.monotonic() + timeout_s
        try:
            while not ctx.join(timeout=0.2):
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"distributed run did not finish within timeout_s={timeout_s}"
                    )
        except (mp.ProcessRaisedException, mp.ProcessExitedException) as exc:
            errors = "; ".join(
                f"{p.stem}: {p.read_text()}" for p in sorted(Path(out_dir).glob("rank*.err"))
            )
            raise RuntimeError(
                f"a rank of the distributed run failed ({errors or 'no error recorded'}): {exc}"
            ) from exc
        finally:
            for proc in ctx.processes:
                if proc.is_alive():
                    proc.kill()
                    proc.join(5)
        states = [torch.load(Path(out_dir) / f"rank{r}.pt") for r in range(world_size)]
    for r, s in enumerate(states[1:], start=1):
        if not torch.equal(s, states[0]):
            raise RuntimeError(f"rank {r} ended with a different state than rank 0")
    return states[0]


def _load_callable(spec: str) -> Callable[..., Any]:
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"expected 'package.module:function', got {spec!r}")
    return getattr(importlib.import_module(module), name)


def _compressor_from(spec: Any) -> Compressor | None:
    if spec is None:
        return None
    if isinstance(spec, dict) and len(spec) == 1:
        ((kind, arg),) = spec.items()
        if kind == "randk":
            return RandK(float(arg))
        if kind == "quant":
            return StochasticQuant(int(arg))
    raise ValueError(f"compressor must be {{randk = ratio}} or {{quant = levels}}, got {spec!r}")


def config_from_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse the ``--config`` file of the ``python -m eris_fl.distributed`` entry point."""
    raw = tomllib.loads(Path(path).read_text())
    eris = dict(raw.get("eris", {}))
    eris["compressor"] = _compressor_from(eris.get("compressor"))
    tr = dict(raw.get("trainer", {}))
    lr = float(tr.pop("lr", 0.1))
    trainer = LocalTrainer(
        optimizer_factory=lambda params: torch.optim.SGD(params, lr=lr),
        trainable_only=eris.get("trainable_only", True),
        include_buffers=eris.get("include_buffers", True),
        **tr,
    )
    return {
        "model_fn": _load_callable(raw["model"]),
        "dataset_fn": _load_callable(raw["data"]),
        "config": ERISConfig(**eris),
        "rounds": int(raw.get("rounds", 1)),
        "comm": raw.get("comm", "p2p"),
        "trainer": trainer,
        "out": raw.get("out"),
        "timeout_s": float(raw.get("timeout_s", 300.0)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m eris_fl.distributed --config cfg.toml`` under ``torchrun`` (env://)."""
    parser = argparse.ArgumentParser(description="ERIS client process for torchrun")
    parser.add_argument("--config", required=True, help="TOML file (see module docstring)")
    args = parser.parse_args(argv)
    spec = config_from_toml(args.config)
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    x = run_worker(
        rank,
        world_size,
        spec["model_fn"],
        spec["dataset_fn"],
        spec["config"],
        spec["rounds"],
        spec["trainer"],
        spec["comm"],
        init_method="env://",
        timeout_s=spec["timeout_s"],
    )
    if rank == 0 and spec["out"]:
        torch.save(x, spec["out"])
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through torchrun
    raise SystemExit(main())
