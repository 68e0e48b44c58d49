"""The language-model benchmark over three bases: AdamW, Muon(+AdamW) and SOAP, each bare and
under EMA-Nesterov, with one-step Nesterov lookahead and schedule-free AdamW as peers.

The spec's protocol at the spec's scale (d 128, batch 32, 800 steps, sweep 300 steps), with the
beta grid swept on every base. Runs are independent single-threaded processes (``workers``),
so the hour-long full run uses both cores.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.optim._muon as torch_muon
from lm import Phases, TinyGPT, stdlib_char_corpus
from tasks import adamw, muon_pair, scored_val_loss, train_from_config

from ema_nesterov import EMANesterov, NesterovLookahead, wsd_lookahead_schedule

BASES = ("AdamW", "Muon", "SOAP")
FULL = {
    "steps": 800,
    "sweep_steps": 300,
    "batch_size": 32,
    "warmup": 50,
    "decay_fraction": 0.2,
    "lr": 3e-3,
    "muon_lr": 0.02,
    "weight_decay": 0.1,
    "model": {"n_layer": 2, "d_model": 128, "n_head": 4, "context": 64, "mlp_ratio": 4},
    "betas": [0.5, 1.0, 2.0, 4.0],
    "gammas": [0.0, 0.9],
    "eval_every": 80,
    "muon_newton_schulz": "float32",
}
#: The smoke run: the d 64 model, batch 16, 8 steps, no sweep.
QUICK = {
    **FULL,
    "steps": 8,
    "sweep_steps": 0,
    "batch_size": 16,
    "warmup": 2,
    "eval_every": 4,
    "final_windows": 128,
    "model": {**FULL["model"], "d_model": 64},
}
#: Below the spec's grid: in the full run every base's best beta was the grid's smallest, 0.5.
SMALL_BETAS = [0.1, 0.25, 0.5]
#: How the full run relates to the spec's protocol.
SCALE = {
    "model_batch_steps": "the spec's: d 128 (0.47 M parameters), batch 32 x 64, 800 steps "
    "(warm-up 50, decay over the last 20 %), sweep 300 steps; 1.6 M training tokens a run",
    "sweep": "beta {0.5, 1, 2, 4} x gamma {0, 0.9} on AdamW (gamma 0 is the one-step lookahead "
    "peer), beta {0.5, 1, 2, 4} at gamma 0.9 on Muon and SOAP; seed 0; each EMA-Nesterov(base) "
    "then runs at its own base's best beta",
    "muon": "torch.optim.Muon with its Newton-Schulz iteration in float32 instead of bfloat16 "
    "(same quintic iteration and coefficients): bfloat16 matmuls cost 0.50 s a step on this "
    "CPU, float32 0.024 s",
}

# ------------------------------------------------------------------ optimizers
Factory = Callable[[TinyGPT, Phases], torch.optim.Optimizer]


def _newton_schulz_float32(
    grad: torch.Tensor, ns_coefficients: tuple[float, float, float], ns_steps: int, eps: float
) -> torch.Tensor:
    """``torch.optim.Muon``'s quintic Newton-Schulz orthogonalisation, in float32."""
    a, b, c = ns_coefficients
    x = grad.to(dtype=torch.float32, copy=True)
    tall = grad.size(0) > grad.size(1)
    if tall:
        x = x.T
    x.div_(x.norm().clamp(min=eps))
    for _ in range(ns_steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


@contextlib.contextmanager
def float32_muon() -> Iterator[None]:
    """Run ``torch.optim.Muon``'s orthogonalisation in float32 inside the block."""
    name = "_zeropower_via_newtonschulz"
    if not hasattr(torch_muon, name):
        raise RuntimeError(f"torch.optim._muon has no {name}: update float32_muon()")
    original = getattr(torch_muon, name)
    setattr(torch_muon, name, _newton_schulz_float32)
    try:
        yield
    finally:
        setattr(torch_muon, name, original)


def _base(cfg: dict[str, Any], name: str, model: TinyGPT) -> Any:
    if name == "AdamW":
        return adamw(cfg, model.parameters())
    if name == "Muon":  # hidden matrices; embeddings, norms and the head on AdamW
        return muon_pair(cfg, model)
    if name == "SOAP":
        from pytorch_optimizer import SOAP

        return SOAP(
            model.parameters(), lr=cfg["lr"], betas=(0.95, 0.95), weight_decay=cfg["weight_decay"]
        )
    raise ValueError(f"unknown base {name!r}")


def make_optimizer(cfg: dict[str, Any], job: dict[str, Any]) -> Factory:
    """The optimizer of one job: ``kind`` bare, ema (gamma, beta) or schedule_free."""

    def factory(model: TinyGPT, ph: Phases) -> torch.optim.Optimizer:
        if job["kind"] == "schedule_free":
            from pytorch_optimizer import ScheduleFreeAdamW

            return ScheduleFreeAdamW(
                model.parameters(),
                lr=cfg["lr"],
                betas=(0.9, 0.95),
                weight_decay=cfg["weight_decay"],
                warmup_steps=ph.warmup,
            )
        base = _base(cfg, job["base"], model)
        if job["kind"] == "bare":  # beta 0 steps several bases together: the base bit for bit
            return EMANesterov(base, gamma=0.0, beta=0.0)
        sched = wsd_lookahead_schedule(ph.total, ph.warmup, ph.decay)
        if job["gamma"] == 0.0:
            return NesterovLookahead(base, beta=job["beta"], beta_schedule=sched)
        return EMANesterov(base, gamma=job["gamma"], beta=job["beta"], beta_schedule=sched)

    return factory


# ------------------------------------------------------------------ running
_CONTEXT: dict[str, Any] = {}  # cfg and corpus, set before the worker processes fork


def _run_job(job: dict[str, Any]) -> dict[str, Any]:
    cfg, corpus = _CONTEXT["cfg"], _CONTEXT["corpus"]
    t0 = time.perf_counter()
    res = train_from_config(
        cfg,
        make_optimizer(cfg, job),
        corpus,
        job["seed"],
        job["steps"],
        schedule_lr=job["kind"] != "schedule_free",
    )
    return {
        "seed": job["seed"],
        "val_loss": scored_val_loss(res),
        "diverged": res.diverged,
        "curve_steps": res.curve_steps,
        "curve_val_loss": res.curve_val_loss,
        "sec_per_step": res.sec_per_step,
        "wall_s": time.perf_counter() - t0,
    }


def _run_all(jobs: list[dict[str, Any]], workers: int) -> list[dict[str, Any]]:
    """Every job, in order; ``workers > 1`` runs them in that many forked processes."""

    def log(job: dict[str, Any], run: dict[str, Any]) -> None:
        print(
            f"  lm_bases {job['label']} seed {job['seed']}: {run['val_loss']:.4f} "
            f"({run['wall_s']:.0f} s)",
            file=sys.stderr,
            flush=True,
        )

    if workers <= 1:
        out = []
        for job in jobs:
            out.append(_run_job(job))
            log(job, out[-1])
        return out
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        out = []
        for job, run in zip(jobs, pool.imap(_run_job, jobs), strict=True):
            log(job, run)
            out.append(run)
    return out


def _job(label: str, kind: str, base: str, seed: int, steps: int, **kw: float) -> dict:
    return {"label": label, "kind": kind, "base": base, "seed": seed, "steps": steps, **kw}


def _sweep_label(base: str, gamma: float, beta: float) -> str:
    prefix = "" if base == "AdamW" else f"{base} "
    return f"{prefix}gamma={gamma:g},beta={beta:g}"


def run_lm_bases(
    seeds: list[int], quick: bool, workers: int = 1, betas: list[float] | None = None
) -> dict[str, Any]:
    """The beta grid on every base (seed 0), then every optimizer on ``seeds``.

    Round one runs the sweep together with the runs that need no beta (bare bases,
    schedule-free); round two the lookahead methods at their bases' best beta.
    """
    cfg = QUICK if quick else FULL
    if betas is not None:
        cfg = {**cfg, "betas": list(betas)}
    _CONTEXT.update(cfg=cfg, corpus=stdlib_char_corpus())
    t0 = time.perf_counter()
    steps, sweep_steps = cfg["steps"], cfg["sweep_steps"]
    bases = ("AdamW",) if quick else BASES
    fixed = [_job(b, "bare", b, s, steps) for b in bases for s in seeds]
    fixed += [_job("ScheduleFree(AdamW)", "schedule_free", "AdamW", s, steps) for s in seeds]
    grid = [
        _job(_sweep_label(b, g, beta), "ema", b, 0, sweep_steps, gamma=g, beta=beta)
        for b in (bases if sweep_steps else ())
        for g in (cfg["gammas"] if b == "AdamW" else [0.9])
        for beta in cfg["betas"]
    ]
    with float32_muon():
        first = _run_all(fixed + grid, workers)
        sweep = {j["label"]: r for j, r in zip(grid, first[len(fixed) :], strict=True)}
        best = {}
        for b in bases:
            for g in cfg["gammas"] if b == "AdamW" else [0.9]:
                scores = {beta: sweep.get(_sweep_label(b, g, beta)) for beta in cfg["betas"]}
                scored = {k: v["val_loss"] for k, v in scores.items() if v is not None}
                # quick (no sweep): the grid's smallest value
                best[(b, g)] = min(scored, key=scored.__getitem__) if scored else cfg["betas"][0]
        second = [
            _job(f"EMA-Nesterov({b})", "ema", b, s, steps, gamma=0.9, beta=best[(b, 0.9)])
            for b in bases
            for s in seeds
        ]
        if not quick:
            second += [
                _job(
                    "NesterovLookahead(AdamW)",
                    "ema",
                    "AdamW",
                    s,
                    steps,
                    gamma=0.0,
                    beta=best[("AdamW", 0.0)],
                )
                for s in seeds
            ]
        done = list(zip(fixed, first[: len(fixed)], strict=True)) + list(
            zip(second, _run_all(second, workers), strict=True)
        )
    runs: dict[str, list[dict[str, Any]]] = {}
    for job, run in done:
        runs.setdefault(job["label"], []).append(run)
    order = [n for b in bases for n in (b, f"EMA-Nesterov({b})")]
    order += ["NesterovLookahead(AdamW)", "ScheduleFree(AdamW)"]
    best_beta = {f"EMA-Nesterov({b})": best[(b, 0.9)] for b in bases}
    if not quick:
        best_beta["NesterovLookahead(AdamW)"] = best[("AdamW", 0.0)]
    return {
        "config": {**cfg, "scale": SCALE, "workers": workers, "best_beta": best_beta},
        "corpus": {
            "sha256": _CONTEXT["corpus"].sha256,
            "python": _CONTEXT["corpus"].python_version,
        },
        "sweep": sweep,
        "runs": {n: runs[n] for n in order if n in runs},
        "wall_s": time.perf_counter() - t0,
    }
