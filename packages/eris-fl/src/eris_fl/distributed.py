r"""Running the gloo engine (:mod:`eris_fl.gloo`): on one machine, or under ``torchrun``.

:func:`launch_local` starts one process per client on 127.0.0.1 and, when a rank fails,
names it first with its own error (or as dropped, when it died without one), before the
other ranks' lost connections. The arithmetic is ERIS's round (:mod:`eris_fl._eris`), so
the result equals :class:`~eris_fl.ERISSimulator`'s.

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
import importlib
import json
import os
import socket
import tempfile
import time
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch import nn

from eris_fl._checks import EvalFn
from eris_fl.client import LocalTrainer, UpdateFn
from eris_fl.compress import Compressor, RandK, StochasticQuant
from eris_fl.config import ERISConfig
from eris_fl.faults import RankFailureError, RankOutcome, describe_failure, describe_timeout
from eris_fl.gloo import COMM_MODES, DatasetFn, ModelFn, run_worker
from eris_fl.simulation import History

if TYPE_CHECKING:
    from multiprocessing.context import ForkContext, ForkServerContext, SpawnContext

__all__ = ["config_from_toml", "free_port", "launch_local", "main", "run_worker"]


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


def _write_stage(out_dir: str, rank: int, round: int, stage: str) -> None:
    (Path(out_dir) / f"rank{rank}.stage").write_text(f"{round} {stage}")


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
    eval_fn: EvalFn | None,
) -> None:
    torch.set_num_threads(threads)
    out = Path(out_dir)
    try:
        history = run_worker(
            rank, world_size, model_fn, dataset_fn, config, rounds, trainer, comm,
            init_method=f"tcp://127.0.0.1:{port}", timeout_s=timeout_s, eval_fn=eval_fn,
            on_round=lambda r, t, stage: _write_stage(out_dir, r, t, stage),
        )  # fmt: skip
    except BaseException as exc:
        # Written before the process dies, with the time, so that the parent can tell the
        # first failure from the other ranks' lost connections that follow it.
        note = " ".join(getattr(exc, "__notes__", []))
        err = {"time": time.time(), "error": f"{type(exc).__name__}: {exc} {note}".strip()}
        (out / f"rank{rank}.err").write_text(json.dumps(err))
        os._exit(1)
    torch.save({"metrics": history.metrics, "params": history.params}, out / f"rank{rank}.pt")


def _prewarm() -> None:
    """Take one throw-away optimizer step so that forked ranks inherit torch's lazy imports.

    The first ``optimizer.step()`` of a process imports ``torch._dynamo`` (~10-20 s on a
    busy 2-core machine); done once here, every forked rank starts warm.
    """
    weight = nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([weight], lr=0.0)
    weight.sum().backward()
    opt.step()


def _outcome(out_dir: Path, rank: int, exitcode: int | None) -> RankOutcome:
    err_file, stage_file = out_dir / f"rank{rank}.err", out_dir / f"rank{rank}.stage"
    err = json.loads(err_file.read_text()) if err_file.is_file() else None
    round, stage = stage_file.read_text().split() if stage_file.is_file() else ("-1", "done")
    return RankOutcome(
        rank=rank,
        exitcode=exitcode,
        error=None if err is None else err["error"],
        error_time=None if err is None else err["time"],
        finished=(out_dir / f"rank{rank}.pt").is_file(),
        round=int(round),
        stage=stage,
    )


def _mp_context(start_method: str) -> SpawnContext | ForkContext | ForkServerContext:
    """The multiprocessing context of a (validated) start method."""
    import torch.multiprocessing as mp

    if start_method == "spawn":
        return mp.get_context("spawn")
    if start_method == "forkserver":
        return mp.get_context("forkserver")
    return mp.get_context("fork")


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
    start_method: Literal["fork", "spawn", "forkserver"] = "fork",
    threads: int = 1,
    eval_fn: EvalFn | None = None,
    return_history: bool = False,
    grace_s: float = 2.0,
) -> torch.Tensor | History:
    """Run ``world_size`` client processes on this machine over gloo on 127.0.0.1.

    Args:
        world_size: Number of clients (processes), ``>= 1``.
        model_fn: Zero-argument model builder (picklable if ``start_method="spawn"``).
        dataset_fn: ``f(rank) -> dataset`` (a dataset, ``DataLoader`` or batch callable).
        config: :class:`~eris_fl.config.ERISConfig`.
        rounds: Number of rounds.
        trainer: Local work (default :class:`~eris_fl.client.LocalTrainer`).
        comm: ``"p2p"`` or ``"collective"``.
        port: TCP port of the rendezvous; ``0`` picks a free one.
        timeout_s: Wall-clock limit for the whole run and for each collective.
        start_method: ``"fork"`` (fast, Linux) or ``"spawn"``.
        threads: torch threads per process.
        eval_fn: ``f(model) -> dict | float`` run on rank 0 after each round, and logged.
        return_history: Return rank 0's :class:`~eris_fl.History` (metrics and final state)
            instead of the final state alone.
        grace_s: After the first failure, how long the other ranks get to report theirs.

    Returns:
        The final flat state (identical on every rank; checked), or the history.

    Raises:
        ValueError: Bad arguments, or ``port`` in use (use ``port=0``).
        RankFailureError: A rank failed or dropped out (named first, with its own error); the
            others are stopped. A ``RuntimeError``.
        RuntimeError: Ranks disagree on the final state.
        TimeoutError: The run exceeded ``timeout_s``.
    """
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
    if start_method not in ("fork", "spawn", "forkserver"):
        raise ValueError(
            f"start_method must be 'fork', 'spawn' or 'forkserver', got {start_method!r}"
        )
    port = _check_port(port)
    if start_method == "fork":
        _prewarm()
    ctx = _mp_context(start_method)
    with tempfile.TemporaryDirectory(prefix="eris_fl_") as tmp:
        out_dir = Path(tmp)
        args = (world_size, port, tmp, model_fn, dataset_fn, config, rounds, trainer, comm)
        procs = [
            ctx.Process(target=_entry, args=(r, *args, timeout_s, threads, eval_fn))
            for r in range(world_size)
        ]
        for proc in procs:
            proc.start()
        try:
            _wait(procs, out_dir, time.monotonic() + timeout_s, timeout_s, grace_s)
        finally:
            for proc in procs:
                if proc.is_alive():
                    proc.kill()
                proc.join(5)
        results = [torch.load(out_dir / f"rank{r}.pt") for r in range(world_size)]
    for r, res in enumerate(results[1:], start=1):
        if not torch.equal(res["params"], results[0]["params"]):
            raise RuntimeError(f"rank {r} ended with a different state than rank 0")
    if return_history:
        return History(metrics=results[0]["metrics"], params=results[0]["params"])
    return results[0]["params"]


def _wait(
    procs: list[Any], out_dir: Path, deadline: float, timeout_s: float, grace_s: float
) -> None:
    """Wait for every rank; on the first failure, give the others ``grace_s`` then raise."""
    while any(p.exitcode is None for p in procs):
        failed = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
        dropped = [
            r for r, p in enumerate(procs)
            if p.exitcode == 0 and not (out_dir / f"rank{r}.pt").is_file()
        ]  # fmt: skip
        if failed or dropped:
            end = time.monotonic() + grace_s
            while time.monotonic() < end and any(p.exitcode is None for p in procs):
                time.sleep(0.05)
            break
        if time.monotonic() > deadline:
            outcomes = [_outcome(out_dir, r, p.exitcode) for r, p in enumerate(procs)]
            raise TimeoutError(
                f"distributed run did not finish within timeout_s={timeout_s}: "
                + describe_timeout(outcomes)
            )
        time.sleep(0.05)
    outcomes = [_outcome(out_dir, r, p.exitcode) for r, p in enumerate(procs)]
    if not all(o.finished for o in outcomes):
        raise RankFailureError(describe_failure(outcomes), outcomes)


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
    history = run_worker(
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
        torch.save(history.params, spec["out"])
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through torchrun
    raise SystemExit(main())
