"""The offline reproduction: convex quadratics and a tiny character-level LM (raw numbers).

``bench/run.py`` turns these dictionaries into benchmark records and plots.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from lm import (
    CharCorpus,
    Phases,
    TinyGPT,
    batch_windows,
    optimizer_state_bytes,
    stdlib_char_corpus,
    train_lm,
)
from quadratic import iterations_to_tolerance, noisy_quadratic_floor
from torch.nn import functional as F  # noqa: N812

from ema_nesterov import EMANesterov, Lookahead, NesterovLookahead, wsd_lookahead_schedule
from methodkit.torch import generator

#: Iterations to f <= 1e-6 f(x0) computed for the spec (kappa 1e2, 1e3, 1e4).
QUADRATIC_REFERENCE: dict[str, tuple[int, int, int]] = {
    "GD": (367, 2685, 17349),
    "EMA gamma=0": (51, 140, 371),
    "EMA gamma=0.5": (70, 197, 631),
    "EMA gamma=0.9": (145, 410, 1074),
}


def loglog_slope(kappas: Sequence[float], iters: Sequence[float]) -> float:
    """Least-squares slope of log(iterations) against log(kappa)."""
    return float(np.polyfit(np.log(kappas), np.log(iters), 1)[0])


def run_quadratic(quick: bool = False) -> dict[str, Any]:
    """Part 1: iterations to tolerance (best beta on the grid) and the noisy loss floor."""
    kappas = [1e2, 1e3] if quick else [1e2, 1e3, 1e4]
    gammas = [0.0, 0.9] if quick else [0.0, 0.5, 0.9]
    out: dict[str, Any] = {"kappas": kappas, "iterations": {}, "best_beta": {}}
    methods: list[tuple[str, str, float | None]] = [("GD", "gd", None)]
    methods += [(f"EMA gamma={g:g}", "ema", g) for g in gammas]
    methods += [("SGD(nesterov=True)", "sgd_nesterov", None)]
    for name, method, gamma in methods:
        res = [iterations_to_tolerance(k, gamma, method=method) for k in kappas]
        out["iterations"][name] = [r.iterations for r in res]
        out["best_beta"][name] = [r.best for r in res]
        out["slope_" + name] = loglog_slope(kappas, [r.iterations for r in res])
    steps, seeds = (1000, [0]) if quick else (4000, [0, 1, 2])
    tail = steps // 4
    out["noisy"] = {
        "config": {"kappa": 1e3, "lr": 0.5, "beta": 0.9, "noise_std": 0.05, "steps": steps},
        "floors": {
            f"EMA gamma={g:g}": noisy_quadratic_floor(g, steps=steps, tail=tail, seeds=seeds)
            for g in (0.0, 0.9)
        },
        "seeds": seeds,
    }
    return out


# ---------------------------------------------------------------------------- LM part
LM_FULL = {
    "steps": 500,
    "sweep_steps": 250,
    "batch_size": 16,
    "warmup": 30,
    "decay_fraction": 0.2,
    "lr": 3e-3,
    "muon_lr": 0.02,
    "weight_decay": 0.1,
    "model": {"n_layer": 2, "d_model": 64, "n_head": 4, "context": 64, "mlp_ratio": 4},
    "sweep_betas": [0.5, 1.0, 2.0, 4.0],
    "eval_every": 50,
    "overhead_steps": 60,
}
#: The smoke run: fewer steps, and the final loss on 128 of the split's ~730 windows.
LM_QUICK = {
    **LM_FULL,
    "steps": 20,
    "sweep_steps": 0,
    "eval_every": 10,
    "overhead_steps": 6,
    "final_windows": 128,
}

Factory = Callable[[TinyGPT, Phases], torch.optim.Optimizer]


def adamw(cfg: dict[str, Any], params: Any) -> torch.optim.Optimizer:
    """The benchmarks' AdamW (the spec's lr, betas (0.9, 0.95) and weight decay)."""
    return torch.optim.AdamW(
        params, lr=cfg["lr"], betas=(0.9, 0.95), weight_decay=cfg["weight_decay"]
    )


def muon_pair(cfg: dict[str, Any], model: TinyGPT) -> list[torch.optim.Optimizer]:
    """Muon on the hidden 2-D weights, :func:`adamw` on embeddings, norms and the head."""
    hidden, rest = model.hidden_matrices()
    muon = torch.optim.Muon(hidden, lr=cfg["muon_lr"], weight_decay=cfg["weight_decay"])
    return [muon, adamw(cfg, rest)]


def lm_factories(cfg: dict[str, Any], beta_ema: float, beta_nl: float) -> dict[str, Factory]:
    """The optimizers compared on the LM, keyed by display name."""

    def wsd(ph: Phases) -> Callable[[int], float]:
        return wsd_lookahead_schedule(ph.total, ph.warmup, ph.decay)

    return {
        "AdamW": lambda m, ph: adamw(cfg, m.parameters()),
        "EMA-Nesterov(AdamW)": lambda m, ph: EMANesterov(
            adamw(cfg, m.parameters()), gamma=0.9, beta=beta_ema, beta_schedule=wsd(ph)
        ),
        "NesterovLookahead(AdamW)": lambda m, ph: NesterovLookahead(
            adamw(cfg, m.parameters()), beta=beta_nl, beta_schedule=wsd(ph)
        ),
        "Lookahead(AdamW)": lambda m, ph: Lookahead(adamw(cfg, m.parameters()), k=5, alpha=0.5),
        "NAdam": lambda m, ph: torch.optim.NAdam(
            m.parameters(),
            lr=cfg["lr"],
            betas=(0.9, 0.95),
            weight_decay=cfg["weight_decay"],
            decoupled_weight_decay=True,
        ),
        "Muon+AdamW": lambda m, ph: _MultiBase(muon_pair(cfg, m)),
        "EMA-Nesterov(Muon+AdamW)": lambda m, ph: EMANesterov(
            muon_pair(cfg, m), gamma=0.9, beta=beta_ema, beta_schedule=wsd(ph)
        ),
    }


class _MultiBase(EMANesterov):
    """Several base optimizers stepped together with no lookahead (beta = 0)."""

    def __init__(self, bases: list[torch.optim.Optimizer]) -> None:
        super().__init__(bases, gamma=0.0, beta=0.0)


def train_from_config(
    cfg: dict[str, Any], factory: Factory, corpus: CharCorpus, seed: int, steps: int, **kw: Any
) -> Any:
    """``train_lm`` with the sizes and schedule of a benchmark config (``kw`` passed on)."""
    return train_lm(
        factory,
        corpus,
        steps=steps,
        batch_size=cfg["batch_size"],
        warmup=min(cfg["warmup"], steps // 4),
        decay_fraction=cfg["decay_fraction"],
        seed=seed,
        eval_every=cfg["eval_every"],
        final_windows=cfg.get("final_windows"),
        model_kwargs=cfg["model"],
        **kw,
    )


def scored_val_loss(res: Any) -> float:
    """Final validation loss of a run, log(256) where it diverged."""
    # a diverged run scores the uniform-prediction loss log(256) so means stay finite
    return res.final_val_loss if not res.diverged else math.log(256)


def measure_overhead(cfg: dict[str, Any], corpus: CharCorpus, steps: int) -> dict[str, float]:
    """Interleaved step timing of AdamW, EMA-Nesterov(AdamW) and its memory-efficient mode.

    All three train their own copy of the same model on the same batches in the same
    process, one step of each in turn, so machine load affects them alike.
    """
    names = ["AdamW", "EMA-Nesterov(AdamW)", "EMA-Nesterov(AdamW, memory_efficient)"]
    models, opts = [], []
    for i, _ in enumerate(names):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = TinyGPT(**cfg["model"])
        base = adamw(cfg, model.parameters())
        opt = base if i == 0 else EMANesterov(base, gamma=0.9, beta=1.0, memory_efficient=i == 2)
        models.append(model)
        opts.append(opt)
    gen = generator(0)
    ctx = cfg["model"]["context"]
    full: dict[str, list[float]] = {n: [] for n in names}
    opt_only: dict[str, list[float]] = {n: [] for n in names}
    for step in range(steps + 5):
        idx = torch.randint(0, len(corpus.train) - ctx - 1, (cfg["batch_size"],), generator=gen)
        x, y = batch_windows(corpus.train, idx, ctx)
        order = list(range(3)) if step % 2 == 0 else [2, 1, 0]
        for i in order:
            t0 = time.perf_counter()
            loss = F.cross_entropy(models[i](x).flatten(0, 1), y.flatten())
            opts[i].zero_grad(set_to_none=True)
            loss.backward()
            t1 = time.perf_counter()
            opts[i].step()
            t2 = time.perf_counter()
            if step >= 5:  # skip warm-up steps
                full[names[i]].append(t2 - t0)
                opt_only[names[i]].append(t2 - t1)
    params = sum(p.numel() * p.element_size() for p in models[0].parameters())
    out: dict[str, float] = {}
    for i, n in enumerate(names):
        out[f"{n}/step_ms"] = 1e3 * statistics.median(full[n])
        out[f"{n}/opt_step_ms"] = 1e3 * statistics.median(opt_only[n])
        out[f"{n}/state_per_param"] = optimizer_state_bytes(opts[i]) / params
    return out


def run_lm(seeds: Sequence[int], quick: bool = False, progress: bool = False) -> dict[str, Any]:
    """Part 2: beta sweep on seed 0, then every method on ``seeds`` at its best setting."""
    cfg = LM_QUICK if quick else LM_FULL
    corpus = stdlib_char_corpus()
    out: dict[str, Any] = {
        "config": cfg,
        "corpus": {
            "sha256": corpus.sha256,
            "python": corpus.python_version,
            "bytes": corpus.n_bytes,
            "source": "methodkit.data.load_stdlib_text (pydoc_data.topics)",
        },
        "sweep": {},
    }
    best = {0.0: 1.0, 0.9: 1.0}
    if cfg["sweep_steps"]:
        for gamma in (0.0, 0.9):
            scores = {}
            for beta in cfg["sweep_betas"]:

                def factory(m: TinyGPT, ph: Phases, g: float = gamma, b: float = beta) -> Any:
                    sched = wsd_lookahead_schedule(ph.total, ph.warmup, ph.decay)
                    return EMANesterov(adamw(cfg, m.parameters()), g, b, beta_schedule=sched)

                res = train_from_config(cfg, factory, corpus, 0, cfg["sweep_steps"])
                scores[beta] = scored_val_loss(res)
                out["sweep"][f"gamma={gamma:g},beta={beta:g}"] = {
                    "val_loss": scored_val_loss(res),
                    "diverged": res.diverged,
                }
            best[gamma] = min(scores, key=scores.__getitem__)
    out["best_beta"] = {"EMA-Nesterov": best[0.9], "NesterovLookahead": best[0.0]}
    methods = lm_factories(cfg, best[0.9], best[0.0])
    if quick:
        methods = {k: methods[k] for k in ("AdamW", "EMA-Nesterov(AdamW)", "Lookahead(AdamW)")}
    runs: dict[str, list[dict[str, Any]]] = {}
    for name, factory in methods.items():
        for seed in seeds:
            res = train_from_config(cfg, factory, corpus, seed, cfg["steps"])
            runs.setdefault(name, []).append(
                {
                    "seed": seed,
                    "val_loss": scored_val_loss(res),
                    "diverged": res.diverged,
                    "curve_steps": res.curve_steps,
                    "curve_val_loss": res.curve_val_loss,
                    "sec_per_step": res.sec_per_step,
                    "state_bytes": res.state_bytes,
                    "param_bytes": res.param_bytes,
                }
            )
    out["runs"] = runs
    out["overhead"] = measure_overhead(cfg, corpus, cfg["overhead_steps"])
    return out
