"""Helper of bench/run.py: the ``decoder`` suite (issue 47), worst Sinkhorn residuals.

Two kinds of input the decoder can receive. (1) Random canonical matrices: sizes n in [2, 16],
m in [2, 7], entries uniform in +-scale before masked double centring, r = 1, c uniform in
[0.2, 1] rescaled to sum n; 2000 at +-60, 500 at +-200, 500 at +-1000 (the issue's sweep:
before the fix 35 of 1000 at +-60 raised). (2) A hostile network: EP-Flow whose velocity network
returns Gaussian noise of std 100 or 1000 (a trained network's outputs have std ~1), sampled
with 50 Euler steps on every test formula, so ``Z`` ends far in the polytope's corners (before
the fix 1 of 8 samples at std 100 raised). Each decode is counted as a failure if it raises;
the worst marginal residual of ``sinkhorn_decode`` (tol 1e-9, float64) and, for the network,
the worst marginal error of the finished samples (after un-smoothing and re-balancing) are
recorded.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from ep_flow import (
    EPFlow,
    EPFlowConfig,
    collate_crystals,
    condition_of,
    double_center,
    make_splits,
    marginal_error,
    sinkhorn_decode,
)
from methodkit.bench import Outcome, ResultRow, check

FULL = {"random": {60: 2000, 200: 500, 1000: 500}, "hostile_std": [100.0, 1000.0],
        "n_test": 400, "samples": 2, "ode_steps": 50, "tol": 1e-9, "chunk": 250}  # fmt: skip
QUICK = {**FULL, "random": {60: 40, 1000: 20}, "n_test": 16, "ode_steps": 10}

COLUMNS = {"n": "decodes", "failures": "failures (raised)", "worst_residual": "worst residual",
           "median_residual": "median residual",
           "worst_sample_error": "worst marginal error of a finished sample",
           "max_abs_z": "largest abs(Z) entry"}  # fmt: skip


class HostileNet(nn.Module):
    """A velocity network returning Gaussian noise of standard deviation ``scale``."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, Z: Tensor, frac: Tensor, lattice: Tensor, *_: Tensor) -> tuple:
        return (self.scale * torch.randn_like(Z), torch.randn_like(frac),
                torch.randn_like(lattice))  # fmt: skip


def random_canonical(rng: np.random.Generator, B: int, scale: float) -> tuple[Tensor, ...]:
    """``B`` padded random canonical matrices (N = 16, M = 7 padding) with marginals and masks."""
    n, m = rng.integers(2, 17, B), rng.integers(2, 8, B)
    rm = torch.as_tensor(np.arange(16)[None] < n[:, None])
    cm = torch.as_tensor(np.arange(7)[None] < m[:, None])
    X = torch.as_tensor(rng.uniform(-scale, scale, (B, 16, 7)))
    c = torch.as_tensor(rng.uniform(0.2, 1.0, (B, 7))) * cm
    c = c / c.sum(1, keepdim=True) * torch.as_tensor(n, dtype=torch.float64)[:, None]
    return double_center(X, rm, cm), rm.double(), c, rm, cm


def residuals(Z: Tensor, r: Tensor, c: Tensor, rm: Tensor, cm: Tensor, tol: float) -> np.ndarray:
    """Marginal residual of every item's decode (NaN where it raised), batch first."""
    try:
        P = sinkhorn_decode(Z, r, c, tol=tol, row_mask=rm, col_mask=cm)
        return marginal_error(P, r, c, rm, cm).numpy()
    except RuntimeError:  # count the failing items one by one
        out = np.full(len(Z), np.nan)
        for i in range(len(Z)):
            try:
                P = sinkhorn_decode(Z[i : i + 1], r[i : i + 1], c[i : i + 1], tol=tol,
                                    row_mask=rm[i : i + 1], col_mask=cm[i : i + 1])  # fmt: skip
                out[i] = float(marginal_error(P, r[i : i + 1], c[i : i + 1], rm[i : i + 1],
                                              cm[i : i + 1])[0])  # fmt: skip
            except RuntimeError:
                pass
        return out


def hostile(cfg: dict, std: float, seed: int) -> dict[str, float]:
    """Raw decoder residuals and finished-sample errors of EP-Flow with a noise network."""
    train, test, _ = make_splits(200, cfg["n_test"], seed)
    torch.manual_seed(seed)
    model = EPFlow(EPFlowConfig(width=16, n_layers=1, n_heads=2), network=HostileNet(std))
    model.set_normalization(collate_crystals(train))
    conds = [condition_of(o) for o in test] * cfg["samples"]
    res, sample_err, fails, z_max = [], [], 0, 0.0
    gen = torch.Generator().manual_seed(seed)
    for i in range(0, len(conds), cfg["chunk"]):
        b = collate_crystals(conds[i : i + cfg["chunk"]], model.config.eps, torch.float64)
        Z, _, _ = model.integrate(b.to(dtype=torch.float32), cfg["ode_steps"], gen)
        Z = Z.double()
        z_max = max(z_max, float(Z.abs().max()))
        res.append(residuals(Z, b.r, b.c, b.row_mask, b.col_mask, cfg["tol"]))
        try:  # the whole pipeline: Sinkhorn, un-smooth, clip, re-balance, ODM validation
            odms = model.sample(conds[i : i + cfg["chunk"]], cfg["ode_steps"], 1, seed + i)
            sample_err += [o.marginal_error() for o in odms]
        except (RuntimeError, ValueError):
            fails += 1
    r = np.concatenate(res)
    return {"n": float(len(r)), "failures": float(np.isnan(r).sum()) + fails,
            "worst_residual": float(np.nanmax(r)), "median_residual": float(np.nanmedian(r)),
            "worst_sample_error": float(max(sample_err, default=float("nan"))),
            "max_abs_z": z_max}  # fmt: skip


def decoder(args: Any) -> Outcome:
    """Worst residuals of the Sinkhorn decoder on random and hostile inputs."""
    cfg, seed = (QUICK if args.quick else FULL), int(args.seeds[0])
    rng, out, t0 = np.random.default_rng(seed), {}, time.perf_counter()
    for scale, B in cfg["random"].items():
        r = np.concatenate([residuals(*random_canonical(rng, min(cfg["chunk"], B - j), scale),
                                      cfg["tol"]) for j in range(0, B, cfg["chunk"])])  # fmt: skip
        out[f"random +-{scale}"] = {"n": float(len(r)), "failures": float(np.isnan(r).sum()),
                                    "worst_residual": float(np.nanmax(r)),
                                    "median_residual": float(np.nanmedian(r))}  # fmt: skip
    for std in cfg["hostile_std"]:
        out[f"hostile network std {std:g}"] = hostile(cfg, std, seed)
    rand = [v for k, v in out.items() if k.startswith("random")]
    host = [v for k, v in out.items() if k.startswith("hostile")]
    worst_rand = max(v["worst_residual"] for v in rand)
    worst_host = max(v["worst_residual"] for v in host)
    worst_err = max(v["worst_sample_error"] for v in host)
    n_rand, n_host = sum(v["n"] for v in rand), sum(v["n"] for v in host)
    fail_rand, fail_host = sum(v["failures"] for v in rand), sum(v["failures"] for v in host)
    stds = ", ".join(f"{s:g}" for s in cfg["hostile_std"])
    claims = [
        check(f"every one of {n_rand:.0f} random canonical matrices (entries up to +-"
              f"{max(cfg['random'])}) decodes within tol {cfg['tol']:g}",
              fail_rand == 0 and worst_rand <= cfg["tol"],
              f"{fail_rand:.0f} failures, worst residual {worst_rand:.2e}",
              inputs=[worst_rand]),
        check(f"a hostile network (velocity std {stds}): "
              f"every one of {n_host:.0f} samples decodes within tol {cfg['tol']:g} and is "
              "feasible (marginal error <= 1e-8)",
              fail_host == 0 and worst_host <= cfg["tol"] and worst_err <= 1e-8,
              f"{fail_host:.0f} failures, worst Sinkhorn residual {worst_host:.2e}, worst sample "
              f"marginal error {worst_err:.2e}", inputs=[worst_host, worst_err]),
    ]  # fmt: skip
    rows = [ResultRow.from_values(k, m, [v[m]], False)
            for k, v in out.items() for m in ("worst_residual", "failures")]  # fmt: skip
    table = [{"input": k, **{words: v[m] for m, words in COLUMNS.items()
                             if m in v and np.isfinite(v[m])}}
             for k, v in out.items()]  # fmt: skip
    config = {**{k: v for k, v in cfg.items() if k != "random"},
              "random": {str(k): v for k, v in cfg["random"].items()}, "seed": seed,
              "residuals": table, "total_s": time.perf_counter() - t0}  # fmt: skip
    return Outcome(
        config,
        rows,
        claims,
        seeds=[seed],
        plot_metrics=["worst_residual"],
        labels={"worst_residual": "worst marginal residual of a decode (sites or atoms)"},
    )
