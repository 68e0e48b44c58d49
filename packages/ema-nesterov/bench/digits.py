"""Digits MLP (scikit-learn's 8x8 digits) under SGD+momentum and AdamW, bare and wrapped.

Checks that the defaults and the momentum-matched beta do not lose to the bare base.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.nn import functional as F  # noqa: N812

from ema_nesterov import EMANesterov, momentum_matched_beta
from methodkit.data import split_digits
from methodkit.torch import generator

BASES: dict[str, Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]] = {
    "SGD(momentum 0.9)": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
    "AdamW": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01),
}
CONFIG = {"hidden": 128, "batch_size": 32, "epochs": 20, "test_fraction": 0.25, "gamma": 0.9}


def _wrap(kind: str, base: torch.optim.Optimizer) -> torch.optim.Optimizer:
    if kind == "base":
        return base
    beta = 1.0 if kind == "default" else momentum_matched_beta(base)
    return EMANesterov(base, gamma=CONFIG["gamma"], beta=beta)


def train_digits(base: str, kind: str, seed: int, epochs: int) -> float:
    """Test accuracy (at theta) of a 64-128-10 ReLU MLP after ``epochs`` of minibatch training."""
    xtr, xte, ytr, yte = (torch.from_numpy(a) for a in split_digits(0.25, random_state=seed))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = torch.nn.Sequential(
            torch.nn.Linear(64, CONFIG["hidden"]), torch.nn.ReLU(), torch.nn.Linear(128, 10)
        )
    opt = _wrap(kind, BASES[base](list(model.parameters())))
    gen = generator(seed, 64)  # key: the digits task
    for _ in range(epochs):
        for idx in torch.randperm(len(ytr), generator=gen).split(CONFIG["batch_size"]):
            opt.zero_grad()
            F.cross_entropy(model(xtr[idx]), ytr[idx]).backward()
            opt.step()
    if isinstance(opt, EMANesterov):
        opt.eval()
    with torch.no_grad():
        return float((model(xte).argmax(1) == yte).float().mean())


def run_digits(seeds: list[int], quick: bool) -> dict[str, Any]:
    """Accuracy per base, kind (base / default beta 1 / momentum-matched beta) and seed."""
    epochs = 1 if quick else CONFIG["epochs"]
    acc: dict[str, list[float]] = {}
    betas = {}
    for base in BASES:
        betas[base] = momentum_matched_beta(BASES[base]([torch.nn.Parameter(torch.ones(1))]))
        for kind in ("base", "default", "matched"):
            acc[f"{base}/{kind}"] = [train_digits(base, kind, s, epochs) for s in seeds]
    return {"accuracy": acc, "matched_beta": betas, "config": {**CONFIG, "epochs": epochs}}
