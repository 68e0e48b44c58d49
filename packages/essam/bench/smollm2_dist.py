"""SmolLM2 with ESSAM's population spread over 2 loopback gloo ranks against one process.

Scaled tiny (a few prompts, a small population, a few steps): the point is the exchange, not
learning. Both runs start from the same weights and seed; the record keeps whether every
trained parameter after the run is bitwise equal across the one-process run and each rank,
and the wall-clock of both (the 2 ranks share a 2-core machine with other jobs: see the load
average in the record).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import smollm2_bench as sb
import torch

from essam import ESSAM
from essam.distributed import DistributedPopulation, launch
from essam.memo import memoize_frozen_layers
from essam.tasks.sums import make_sum_prompts
from methodkit.bench import Outcome, ResultRow, check

FULL: dict[str, Any] = {
    "model": sb.FULL["model"],
    "blocks": 1,
    "prompts": 4,
    "population": 4,
    "steps": 2,
    "variant": "standard",
    "sigma": 1e-3,
    "lr": 5e-4,
    "max_new_tokens": 3,
    "world_size": 2,
    "start_method": "fork",
    "scale": "4 prompts, N = 4, 2 standard-ESSAM steps (16 closure calls), trained subset: "
    "the last decoder layer and the final norm",
}
QUICK = {**FULL, "model": sb.QUICK["model"]}


def run(model: Any, tok: Any, cfg: dict, seed: int, distributed: bool) -> tuple[list, float]:
    """``cfg["steps"]`` ESSAM steps; the trained tensors afterwards and the seconds taken.

    Restores the weights it changed, so the same loaded model serves the next run.
    """
    params = sb.select_subset(model, cfg["blocks"])
    saved = [p.detach().clone() for p in params]
    if distributed:
        torch.set_num_threads(1)
    t0 = time.perf_counter()
    opt = ESSAM(
        params,
        sigma=cfg["sigma"],
        lr=cfg["lr"],
        rho=0.05 * cfg["sigma"] * sum(p.numel() for p in params) ** 0.5,
        population_size=cfg["population"],
        variant=cfg["variant"],
        seed=seed,
        population=DistributedPopulation() if distributed else None,
    )
    rng = np.random.default_rng(seed)
    train = make_sum_prompts(200, "train", 100 + seed)
    counter = [0]
    with memoize_frozen_layers(model.model.layers[: -cfg["blocks"]]):
        for _ in range(cfg["steps"]):
            rows = [train[i] for i in rng.choice(len(train), cfg["prompts"], replace=False)]
            opt.step(sb.make_closure(model, tok, rows, cfg["max_new_tokens"], counter))
    seconds = time.perf_counter() - t0
    out = [p.detach().clone() for p in params]
    with torch.no_grad():
        for p, s in zip(params, saved, strict=True):
            p.copy_(s)
    return out, seconds


def outcome(quick: bool, seeds: list) -> Outcome:
    cfg = dict(QUICK if quick else FULL)
    model, tok = sb.load(quick)
    single, t_single = run(model, tok, cfg, seeds[0], False)
    t0 = time.perf_counter()
    ranks = launch(
        run,
        cfg["world_size"],
        model,
        tok,
        cfg,
        seeds[0],
        True,
        timeout=900,
        start_method=cfg["start_method"],
    )
    t_launch = time.perf_counter() - t0
    equal = [all(torch.equal(p, q) for p, q in zip(r[0], single, strict=True)) for r in ranks]
    moved = any(
        not torch.equal(p, q)
        for p, q in zip(single, sb.select_subset(model, cfg["blocks"]), strict=True)
    )
    t_ranks = max(r[1] for r in ranks)
    cfg.update({"bitwise_equal_per_rank": equal, "update_moved_weights": moved})
    rows = [
        ResultRow.from_values("1 process", "seconds", [t_single], False),
        ResultRow.from_values("2 gloo ranks", "seconds", [t_ranks], False),
        ResultRow.from_values("2 gloo ranks, with start-up", "seconds", [t_launch], False),
    ]
    claim = check(
        "the update with the population over 2 gloo ranks is bitwise equal to one process's",
        all(equal) and moved,
        f"ranks equal to one process: {equal}; the run moved the weights: {moved}; "
        f"{t_single:.1f} s in one process vs {t_ranks:.1f} s on 2 ranks",
        inputs=[t_single, t_ranks],
        quick=True,
    )
    return Outcome(cfg, rows, [claim], seeds=seeds[:1], units={"seconds": "s"})
