"""Peak memory of ENGINE vs MeZO steps on a wide MLP, each measured in a spawned process."""

from __future__ import annotations

import torch

from engine_zo import Engine, MeZO
from methodkit.bench import Claim, ResultRow, check, peak_memory

EPS = 1e-3
CLAIM = (
    "(4) peak memory of one ENGINE step <= 1.05 x MeZO's + 8 MiB on a ~20M-parameter MLP, "
    "no tensor in optimizer state"
)


def wide_mlp(width: int, depth: int) -> torch.nn.Module:
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers)


def memory_step(method: str, width: int, depth: int, threads: int) -> None:
    """Build the wide MLP and take two steps (ENGINE: a fine step, then a coarse step that
    injects the fine direction), all inside the measured child process."""
    torch.set_num_threads(threads)
    model = wide_mlp(width, depth)
    x = torch.randn(32, width)

    def loss() -> torch.Tensor:
        return model(x).pow(2).mean()

    if method == "MeZO":
        opt = MeZO(model.parameters(), lr=1e-6, eps=EPS)
    else:
        opt = Engine(model.parameters(), lr=1e-6, eps=EPS, pre_smooth=1)
    opt.step(loss)
    opt.step(loss)
    if len(opt.state) != 0:
        raise RuntimeError(f"{method} keeps tensors in its state: {len(opt.state)}")


def measure(
    width: int, depth: int, reps: int, threads: int, quick: bool
) -> tuple[list[ResultRow], Claim, dict]:
    """Rows, claim (4) and config; a quick run's tiny MLP cannot test the claim."""
    n_params = depth * (width * width + width)
    peaks: dict[str, list[float]] = {"MeZO": [], "ENGINE": []}
    for _ in range(reps):
        for method in peaks:
            bytes_ = peak_memory(
                memory_step, "cpu", args=(method, width, depth, threads), in_process=quick
            )
            peaks[method].append(bytes_ / 2**20)
    print(
        f"  peak memory ({n_params / 1e6:.1f}M params): "
        + ", ".join(f"{k}={min(v):.1f} MiB" for k, v in peaks.items()),
        flush=True,
    )
    mezo, engine = min(peaks["MeZO"]), min(peaks["ENGINE"])
    note = f"; quick run: {n_params} parameters, not the claim's model" if quick else ""
    claim = check(
        CLAIM,
        engine <= 1.05 * mezo + 8.0,
        f"ENGINE {engine:.1f} MiB vs MeZO {mezo:.1f} MiB (+{engine - mezo:.1f} MiB, "
        f"params alone {n_params * 4 / 2**20:.1f} MiB); optimizer state tensors: 0{note}",
        inputs=[engine, mezo],
        degenerate=quick,
    )
    rows = [
        ResultRow.from_values(k, "peak_MiB_above_torch_import", v, False) for k, v in peaks.items()
    ]
    cfg = {
        "width": width,
        "depth": depth,
        "params": n_params,
        "batch": 32,
        "reps": reps,
        "steps_measured": 2,
        "measure": "methodkit.bench.peak_memory (CPU RSS, "
        + ("in process: quick smoke run)" if quick else "spawned process)"),
    }
    return rows, claim, cfg
