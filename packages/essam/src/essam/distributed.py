"""Population evaluation over the ranks of a ``torch.distributed`` group.

Every rank holds the same model. :class:`DistributedPopulation` gives population member ``i``'s
closure call to rank ``i % world_size``; the ranks exchange only the run's seed and step (to
check that they agree) and one float64 reward per member. Every rank still *replays* every
member's in-place perturbation and its undo (noise regenerated from the seed, no forward
pass): an in-place ``theta + sigma*eps - sigma*eps`` is not exactly ``theta`` in floating
point, so skipping other ranks' members would leave each rank with different rounding. With
the replay all ranks hold bitwise the weights of a single-process run and compute the same
update, for the same seed.

Launch with ``torchrun --nproc-per-node K script.py`` (the script calls
``torch.distributed.init_process_group("gloo")``), or from Python with :func:`launch`, which
starts K local processes on a loopback gloo group.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import pickle
import queue
import socket
import time
from collections.abc import Callable
from datetime import timedelta
from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext
from typing import Any, Literal

import torch

__all__ = ["DistributedPopulation", "launch"]

Member = Callable[[int, bool], "float | None"]


class DistributedPopulation:
    """Splits ESSAM's closure calls over the ranks of a process group (``ESSAM(population=)``).

    Args:
        group: A ``torch.distributed`` process group (default: the world group, which must be
            initialised already).

    Raises:
        RuntimeError: If ``torch.distributed`` is unavailable or not initialised.
    """

    def __init__(self, group: Any = None) -> None:
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                "DistributedPopulation needs an initialised torch.distributed process group: "
                "call torch.distributed.init_process_group first (or use essam.distributed"
                ".launch / torchrun)"
            )
        self._dist = dist
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self._root = dist.get_global_rank(group, 0) if group is not None else 0

    def owner(self, member: int) -> int:
        """Rank that calls the closure for population member ``member``."""
        return member % self.world_size

    def check_agreement(self, seed: int, step: int) -> None:
        """Broadcast rank 0's ``(seed, step)``; every rank raises if any rank holds others.

        Raises:
            ValueError: On every rank, if some rank's seed or step differs from rank 0's
                (all ranks raise, so none waits for the others in a later collective).
        """
        mine = torch.tensor([seed, step], dtype=torch.int64)
        root = mine.clone()
        self._dist.broadcast(root, src=self._root, group=self.group)
        differs = torch.tensor([0 if torch.equal(mine, root) else 1], dtype=torch.int64)
        self._dist.all_reduce(differs, op=self._dist.ReduceOp.MAX, group=self.group)
        if int(differs[0]):
            raise ValueError(
                f"the ranks disagree on the run: rank 0 has seed {int(root[0])} at step "
                f"{int(root[1])}, rank {self.rank} has seed {seed} at step {step}"
            )

    def evaluate(self, member: Member, n: int) -> list[float]:
        """Rewards of members ``0..n-1``; ``member(i, call)`` perturbs, calls if asked, restores.

        A closure that fails on one rank does not hang the others: its reward is sent as NaN,
        the failing rank re-raises its own error and the other ranks raise ``ValueError``.
        """
        local = torch.full((n,), math.nan, dtype=torch.float64)
        error: BaseException | None = None
        for i in range(n):
            call = error is None and self.owner(i) == self.rank
            try:
                value = member(i, call)
            except Exception as exc:  # sent as NaN first, so the other ranks do not hang
                error = exc
                continue
            if call:  # a member that returns None where it should call is reported as failed
                local[i] = math.nan if value is None else value
        parts = [torch.empty_like(local) for _ in range(self.world_size)]
        self._dist.all_gather(parts, local, group=self.group)
        if error is not None:
            raise error
        rewards = [float(parts[self.owner(i)][i]) for i in range(n)]
        failed = [i for i, r in enumerate(rewards) if not math.isfinite(r)]
        if failed:
            raise ValueError(
                f"closure (population member {failed[0]}) failed on rank {self.owner(failed[0])}"
            )
        return rewards


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(
    fn: Callable[..., Any], rank: int, world: int, port: int, args: tuple, out: Any
) -> None:
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))
    try:  # plain pickled bytes: a queued tensor would be shared memory the exiting rank owns
        out.put((rank, "ok", pickle.dumps(fn(*args))))
    except Exception as exc:
        out.put((rank, "error", f"{type(exc).__name__}: {exc}"))
    finally:
        dist.destroy_process_group()


def launch(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout: float = 120.0,
    start_method: Literal["spawn", "fork", "forkserver"] = "spawn",
) -> list[Any]:
    """Run ``fn(*args)`` on ``world_size`` local processes joined in a loopback gloo group.

    Inside ``fn``, ``torch.distributed`` is initialised, so ``DistributedPopulation()`` works.
    With ``start_method="spawn"`` (default, safe everywhere) ``fn`` must be importable (a
    module-level function) and each rank pays its own ``import torch``; ``"fork"`` (POSIX)
    starts in milliseconds from the current process but inherits its state. Results must be
    picklable.

    Returns:
        The ranks' results, in rank order.

    Raises:
        ValueError: If ``world_size`` < 1 or ``start_method`` is unknown.
        RuntimeError: If a rank raised (its error is named).
        TimeoutError: If the ranks did not finish within ``timeout`` seconds (they are killed).
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be an int >= 1, got {world_size!r}")
    if start_method not in ("spawn", "fork", "forkserver"):
        raise ValueError(f"start_method must be spawn, fork or forkserver, got {start_method!r}")
    # one literal per call, so the type checker sees a context that has .Process
    ctx: SpawnContext | ForkContext | ForkServerContext
    if start_method == "fork":
        ctx = mp.get_context("fork")
    elif start_method == "forkserver":
        ctx = mp.get_context("forkserver")
    else:
        ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = _free_port()
    procs = [
        ctx.Process(target=_worker, args=(fn, r, world_size, port, args, out), daemon=True)
        for r in range(world_size)
    ]
    for p in procs:
        p.start()
    results: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(results) < world_size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"launch: {world_size} ranks did not finish in {timeout:g} s")
            try:
                rank, status, value = out.get(timeout=min(left, 1.0))
            except queue.Empty:  # no news: fail fast if a rank died without reporting
                dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
                if dead:
                    code = procs[dead[0]].exitcode
                    raise RuntimeError(f"launch: rank {dead[0]} exited with code {code}") from None
                continue
            if status == "error":
                raise RuntimeError(f"launch: rank {rank} raised {value}")
            results[rank] = pickle.loads(value)
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
    return [results[r] for r in range(world_size)]
