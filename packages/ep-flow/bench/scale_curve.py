"""Helper of bench/run.py: the ``scale_curve`` suite (issue 47), capacity or method?

The ``synthetic`` record (width 32, 2 axial layers, batch 32, 4000 steps, 3 seeds) leaves
EP-Flow's Match@1 at 0.38 (floor 0.60) with a learning curve that is flat from 3000 to 4000
steps. This suite trains ONLY EP-Flow at the spec's model size (width 64, 4 axial layers,
4 heads, batch 64) with the same protocol and training settings as that record (same split and
test formulas for the seed, AdamW lr 3e-3, 5 % warm-up + cosine decay over a 4000-step schedule,
``lam_F = 12``, 50 Euler steps, test Match@1 with one sample every 500 steps), but stops after
``steps`` (< 4000) steps of that schedule: every checkpoint then sees the same learning rate as
the width-32 run at the same step, so the two curves compare at equal steps. One seed (0): the
width-32 curve of the same seed (same split and test formulas) is the paired reference, the
mean of its 3 seeds a second one.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import plots
import torch

from ep_flow import EPFlow, EPFlowConfig, condition_of, make_splits, train_flow
from ep_flow.metrics import match_rate
from methodkit.bench import Outcome, ResultRow, check

REFERENCE = Path(__file__).resolve().parent / "results" / "synthetic.json"
MEAN_KEY = "ep_flow match@1 (1 sample, mean of seeds)"
SCALE = (
    "EP-Flow only, one seed, at the spec's model size (width 64 / 4 axial layers / batch 64) "
    "for 3500 of a 4000-step cosine schedule (the width-32 record's); the spec trains 6000 steps "
    "x 3 seeds x 4 learned models, so this is 3500 / 72000 = 1/20.6 of the spec's training "
    "compute (7/12 of its steps for this model and seed); test set 100 (spec 400)"
)
FULL = {"n_train": 4000, "n_test": 100, "width": 64, "layers": 4, "heads": 4, "batch": 64,
        "steps": 3500, "schedule_steps": 4000, "lr": 3e-3, "schedule": "cosine", "lam_f": 12.0,
        "ode_steps": 50, "curve_every": 500, "margin": 0.10,
        "compute_fraction": 3500 / (6000 * 3 * 4), "scale": SCALE}  # fmt: skip
QUICK = {**FULL, "n_train": 300, "n_test": 16, "width": 16, "layers": 1, "heads": 2, "batch": 16,
         "steps": 20, "schedule_steps": 40, "ode_steps": 5, "curve_every": 10,
         "compute_fraction": 20 / (6000 * 3 * 4) / 128,
         "scale": "smoke run: width 16, 1 layer, 20 of 40 steps, 16 test formulas"}  # fmt: skip


def width32_curve(seed: int) -> dict[int, tuple[float, float]]:
    """``{step: (Match@1 of this seed, mean of seeds)}`` from the committed synthetic record."""
    if not REFERENCE.is_file():
        return {}
    record = json.loads(REFERENCE.read_text())
    seeds = list(record["seeds"])
    if seed not in seeds:
        return {}
    j = seeds.index(seed)
    return {int(row["steps"]): (float(row["per seed"].split(" / ")[j]), float(row[MEAN_KEY]))
            for row in record["config"].get("curve", [])}  # fmt: skip


def train_with_curve(cfg: dict, seed: int) -> tuple[dict[int, float], dict[str, float]]:
    """Train EP-Flow at ``cfg``'s size; test Match@1 (1 sample) every ``curve_every`` steps."""
    t0 = time.perf_counter()
    train, test, _ = make_splits(cfg["n_train"], cfg["n_test"], seed)
    conds, curve, eval_s = [condition_of(o) for o in test], {}, [0.0]
    data_s = time.perf_counter() - t0

    def callback(step: int, model: EPFlow) -> None:
        t = time.perf_counter()
        flat = model.sample(conds, cfg["ode_steps"], 1, seed)
        curve[step], _ = match_rate([[o] for o in flat], test)
        eval_s[0] += time.perf_counter() - t
        print(f"[scale_curve] step {step}: Match@1 {curve[step]:.3f} "
              f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)  # fmt: skip

    torch.manual_seed(seed)  # the same initialisation rule as the synthetic suite
    model = EPFlow(EPFlowConfig(width=cfg["width"], n_layers=cfg["layers"], n_heads=cfg["heads"],
                                lam_f=cfg["lam_f"]))  # fmt: skip
    t = time.perf_counter()
    losses = train_flow(model, train, cfg["steps"], cfg["batch"], cfg["lr"], seed,
                        schedule=cfg["schedule"], progress=False, callback=callback,
                        callback_every=cfg["curve_every"],
                        schedule_steps=cfg["schedule_steps"])  # fmt: skip
    train_s = time.perf_counter() - t - eval_s[0]
    stats = {"data_s": data_s, "curve_s": eval_s[0], "train_s": train_s,
             "train_ms_per_step": 1e3 * train_s / cfg["steps"],
             "final_loss": float(np.mean(losses[-50:])),
             "n_params": float(sum(p.numel() for p in model.parameters()))}  # fmt: skip
    return curve, stats


def scale_curve(args: Any) -> Outcome:
    """EP-Flow's Match@1 curve at the spec's model size beside the width-32 record's."""
    cfg, seed = (QUICK if args.quick else FULL), int(args.seeds[0])
    curve, stats = train_with_curve(cfg, seed)
    ref = width32_curve(seed)
    rows = [{"steps": s, "spec size (w64, 4 layers, batch 64)": m,  # None: no width-32 point
             f"width 32 (seed {seed})": ref[s][0] if s in ref else None,
             "difference": round(m - ref[s][0], 4) if s in ref else None,
             "width 32 (mean of 3 seeds)": ref[s][1] if s in ref else None}
            for s, m in sorted(curve.items())]  # fmt: skip
    last = max(curve)
    got, base = curve[last], ref.get(last, (float("nan"),))[0]
    claims = [
        check(f"capacity: at equal steps ({last}) and equal learning rate, the spec-size model's "
              f"Match@1 exceeds the width-32 model's (same seed, split and test formulas) by "
              f">= {cfg['margin']:.2f}", got >= base + cfg["margin"],
              f"{got:.2f} vs {base:.2f} (difference {got - base:+.2f})", inputs=[got, base]),
        check(f"the spec's floor at the spec's model size: Match@1 >= 0.60 after {last} steps "
              "(one seed; the spec trains 6000)", got >= 0.60, f"{got:.2f}", inputs=[got]),
    ]  # fmt: skip
    method = f"ep_flow w{cfg['width']}/{cfg['layers']}L/b{cfg['batch']}"
    results = [
        ResultRow.from_values(method, "match@1_last", [got], True),
        ResultRow.from_values(method, "train_ms_per_step", [stats["train_ms_per_step"]], False),
        ResultRow.from_values(method, "final_loss", [stats["final_loss"]], False),
    ]
    config = {**cfg, "seed": seed, **stats, "curve": rows,
              "reference": "bench/results/synthetic.json (curve, width 32 / 2 layers / batch 32, "
                           "cosine over 4000 steps, seeds 0 1 2)"}  # fmt: skip
    return Outcome(config, results, claims, seeds=[seed], plot_metrics=["match@1_last"],
                   labels={"match@1_last": "test Match@1 at the last checkpoint"},
                   extra_plots={"curve": plots.plot_scale_curve})  # fmt: skip
