"""Two-process CPU runs (gloo, loopback) of EMANesterov under DDP and FSDP2, for test_distributed.

``python distributed_worker.py OUT`` computes the single-process references in this process,
then spawns two ranks (``torch.multiprocessing.spawn``, ``tcp://127.0.0.1`` on a free port)
that run every scenario on the same global batches, each rank holding half of each batch.
Everything lands in ``OUT/ref.pt`` and ``OUT/rank{0,1}.pt`` for the test to compare:

- ``ddp``: ``DistributedDataParallel``, ``AdamW(foreach)`` base, 6 steps.
- ``fsdp``: FSDP2 ``fully_shard`` on each linear layer and the root (DTensor parameters),
  ``AdamW(fused)`` base, 6 steps; the placements and local shapes of ``m`` and ``exp_avg``.
- ``dcp``: the FSDP2 run stopped after 3 steps, saved with ``torch.distributed.checkpoint``,
  loaded into fresh objects and run 3 more steps.
- ``accum``: DDP with 2 micro-batches per step (``no_sync`` on the first) under
  ``torch.autocast("cpu", dtype=torch.bfloat16)``, 4 steps.

Each run records ``y`` (the parameters in training mode), ``theta`` (after ``opt.eval()``),
the loss at theta in eval mode, and ``y`` again after ``opt.train()``, as full tensors.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ema_nesterov import EMANesterov

WORLD = 2
GLOBAL_BATCH = 8
STEPS = 6
ACCUM_STEPS = 4


def make_model() -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def make_opt(model: torch.nn.Module, impl: str) -> EMANesterov:
    kw = {"fused": True} if impl == "fused" else {"foreach": True}
    base = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1, **kw)
    return EMANesterov(base, gamma=0.9, beta=0.5)


def data(steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(1)
    return [
        (torch.randn(GLOBAL_BATCH, 6, generator=gen), torch.randn(GLOBAL_BATCH, 4, generator=gen))
        for _ in range(steps)
    ]


def mse(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((model(x).float() - y) ** 2).mean()


def full(t: torch.Tensor) -> torch.Tensor:
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().clone()


def snapshot(model: torch.nn.Module, opt: EMANesterov, x: torch.Tensor, y: torch.Tensor) -> dict:
    """y, theta (eval mode) and the loss there, y after train(), all as full tensors."""
    names = [n.removeprefix("module.") for n, _ in model.named_parameters()]
    out = {"y": {n: full(p) for n, p in zip(names, model.parameters(), strict=True)}}
    opt.eval()
    out["theta"] = {n: full(p) for n, p in zip(names, model.parameters(), strict=True)}
    with torch.no_grad():
        out["eval_loss"] = mse(model, x, y).item()
    opt.train()
    out["y_after_train"] = {n: full(p) for n, p in zip(names, model.parameters(), strict=True)}
    return out


def train_single(model, opt, batches, micro: int = 1, autocast: bool = False) -> None:
    """The single-process reference: each global batch in ``micro`` consecutive slices."""
    for x, y in batches:
        opt.zero_grad()
        for xs, ys in zip(x.chunk(micro), y.chunk(micro), strict=True):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = mse(model, xs, ys) / micro
            loss.backward()
        opt.step()


def references() -> dict:
    out = {}
    for name, impl, steps in (("ddp", "foreach", STEPS), ("fsdp", "fused", STEPS)):
        model = make_model()
        opt = make_opt(model, impl)
        batches = data(steps)
        train_single(model, opt, batches)
        out[name] = snapshot(model, opt, *batches[0])
    model = make_model()
    opt = make_opt(model, "foreach")
    batches = data(ACCUM_STEPS)
    # The ranks see rows [0:4] and [4:8], each in 2 micro-batches of 2 rows: 4 slices.
    train_single(model, opt, batches, micro=2 * WORLD, autocast=True)
    out["accum"] = snapshot(model, opt, *batches[0])
    return out


def shard(t: torch.Tensor, rank: int) -> torch.Tensor:
    return t.chunk(WORLD)[rank]


def run_ddp(rank: int) -> dict:
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(make_model())
    opt = make_opt(model, "foreach")
    batches = data(STEPS)
    for x, y in batches:
        opt.zero_grad()
        mse(model, shard(x, rank), shard(y, rank)).backward()
        opt.step()
    out = snapshot(model, opt, *batches[0])
    out["m_vs_base"] = layout(opt)
    return out


def run_accum(rank: int) -> dict:
    """DDP, 2 micro-batches per step (no all-reduce on the first), bf16 autocast."""
    from torch.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(make_model())
    opt = make_opt(model, "foreach")
    batches = data(ACCUM_STEPS)
    for x, y in batches:
        opt.zero_grad()
        micro = list(zip(shard(x, rank).chunk(2), shard(y, rank).chunk(2), strict=True))
        for i, (xs, ys) in enumerate(micro):
            sync = model.no_sync() if i < len(micro) - 1 else torch.enable_grad()
            with sync, torch.autocast("cpu", dtype=torch.bfloat16):
                out_dtype = model(xs).dtype
                loss = mse(model, xs, ys) / len(micro)
            loss.backward()
        opt.step()
    return {**snapshot(model, opt, *batches[0]), "autocast_dtype": str(out_dtype)}


def fsdp_model() -> torch.nn.Module:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (WORLD,))
    model = make_model()
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def layout(opt: EMANesterov) -> list[dict]:
    """For every parameter: type, global and local shape, placements of p, m and exp_avg."""

    def describe(t: torch.Tensor) -> dict:
        local = t.to_local() if hasattr(t, "to_local") else t
        return {
            "type": type(t).__name__,
            "shape": tuple(t.shape),
            "local_shape": tuple(local.shape),
            "placements": str(getattr(t, "placements", None)),
        }

    base = opt.base_optimizers[0]
    return [
        {
            "p": describe(p),
            "m": describe(opt.state[p]["m"]),
            "exp_avg": describe(base.state[p]["exp_avg"]),
        }
        for g in opt.param_groups
        for p in g["params"]
    ]


def fsdp_steps(model, opt, batches, rank: int) -> None:
    for x, y in batches:
        opt.zero_grad()
        mse(model, shard(x, rank), shard(y, rank)).backward()
        opt.step()


def run_fsdp(rank: int) -> dict:
    model = fsdp_model()
    opt = make_opt(model, "fused")
    batches = data(STEPS)
    fsdp_steps(model, opt, batches, rank)
    out = snapshot(model, opt, *batches[0])
    out["m_vs_base"] = layout(opt)
    return out


def run_dcp(rank: int, path: str) -> dict:
    import torch.distributed.checkpoint as dcp

    from ema_nesterov.distributed import get_state_dict, set_state_dict

    batches = data(STEPS)
    model = fsdp_model()
    opt = make_opt(model, "fused")
    fsdp_steps(model, opt, batches[: STEPS // 2], rank)
    model_sd, optim_sd = get_state_dict(model, opt)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=path)
    del model, opt, model_sd, optim_sd

    model = fsdp_model()
    opt = make_opt(model, "fused")
    model_sd, optim_sd = get_state_dict(model, opt)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    fsdp_steps(model, opt, batches[STEPS // 2 :], rank)
    return snapshot(model, opt, *batches[0])


def worker(rank: int, port: int, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD
    )
    try:
        results = {
            "ddp": run_ddp(rank),
            "fsdp": run_fsdp(rank),
            "dcp": run_dcp(rank, os.path.join(out, "ckpt")),
            "accum": run_accum(rank),
        }
        torch.save(results, os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(out: str) -> None:
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback only
    torch.set_num_threads(1)
    Path(out).mkdir(parents=True, exist_ok=True)
    torch.save(references(), os.path.join(out, "ref.pt"))
    mp.spawn(worker, args=(free_port(), out), nprocs=WORLD, join=True)


if __name__ == "__main__":
    main(sys.argv[1])
