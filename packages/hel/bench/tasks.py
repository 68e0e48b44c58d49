"""Helpers of bench/run.py: configurations, data, models, training (long runs: long_runs.py).

Script helpers, not part of the wheel (``bench/gunpoint_probe.py`` uses them too).
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np
import torch

import methodkit
from hel import (
    BPTT,
    EchoLearning,
    EchoRNN,
    EProp,
    FrozenRecurrence,
    HamiltonianEcho,
    HopfieldOscillatorCell,
    RateEchoCell,
    TruncatedBPTT,
    compare_estimators,
    delayed_recall,
    load_aeon,
    sequential_digits,
)
from methodkit.bench import Claim, check
from methodkit.torch import generator

CONFIG: dict[str, dict[str, Any]] = {
    "sequential_digits": {
        "n": 64,
        "dt": 0.2,
        "lr": 3e-3,
        "batch": 64,
        "epochs": 30,
        "methods": ["bptt", "hel", "tbptt_k10", "eprop_sym", "frozen"],
        "scale": "1: the spec's protocol (30 epochs, all 1437 training digits, 3 seeds)",
    },
    "gunpoint": {
        "n": 64,
        "dt": 0.2,
        "lr": 3e-3,
        "batch": 0,
        "epochs": 300,
        "methods": ["bptt", "hel", "frozen"],
        "scale": "the spec's 300 full-batch epochs at lr 3e-3, 3 seeds; the TBPTT and e-prop "
        "baselines (no claim on this task) not run",
    },
    "basic_motions": {
        "n": 64,
        "dt": 0.2,
        "lr": 3e-3,
        "batch": 0,
        "epochs": 300,
        "methods": ["bptt", "hel", "frozen"],
        "scale": "the spec's 300 full-batch epochs at lr 3e-3, 3 seeds; the TBPTT and e-prop "
        "baselines (no claim on this task) not run",
    },
    "delayed_recall": {
        "n": 64,
        "dt": 0.2,
        "lr": 3e-3,
        "batch": 64,
        "epochs": 30,
        "n_train": 500,
        "methods": ["bptt", "hel", "tbptt_k10", "eprop_sym", "frozen"],
        "scale": "0.25 of the training data: the first 500 of the spec's 2000 training "
        "sequences, 30 epochs (the spec's minibatch protocol), the spec's 500 test sequences",
    },
    "echo_learning": {
        "n": 64,
        "dt": 0.2,
        "lr": 3e-3,
        "batch": 64,
        "epochs": 30,
        "n_train": 512,
        "methods": ["bptt", "el", "el=0.001", "el=0.01", "el=0.1"],
        "scale": "0.36 of the training data: the spec's 30 epochs on the first 512 of the 1437 "
        "training digits, 3 seeds, the full 360-digit test split",
    },
}
#: ``--quick`` overrides: a smoke run of every benchmark, not the full-scale verdicts.
QUICK: dict[str, dict[str, Any]] = {
    "sequential_digits": {"epochs": 1, "methods": ["bptt", "hel", "eprop_sym"]},
    "gunpoint": {"epochs": 3, "methods": ["bptt", "hel"]},
    "basic_motions": {"epochs": 3, "methods": ["bptt", "hel"]},
    "delayed_recall": {"epochs": 1, "n_train": 128, "methods": ["bptt", "hel"]},
    "echo_learning": {"epochs": 1, "n_train": 128, "methods": ["bptt", "el", "el=0.1"]},
}
THRESHOLDS = {
    "sequential_digits": 0.80,
    "gunpoint": 0.85,
    "basic_motions": 0.85,
    "delayed_recall": 0.30,
}
PROBE_ESTIMATORS = ["hel", "hel_two_pass", "eprop_sym", "tbptt_k10"]


def config(name: str, quick: bool) -> dict[str, Any]:
    """The configuration of task ``name`` (with the quick overrides under ``--quick``)."""
    cfg = dict(CONFIG[name])
    if quick:
        cfg.update(QUICK[name], scale="--quick smoke run, not the protocol")
    return cfg


def make_estimator(name: str, model: Any, loss: Any, T: int) -> Any:
    """The estimator behind a benchmark method name (``el=0.1``: EL with homeostasis 0.1)."""
    if name == "bptt":
        return BPTT(model, loss)
    if name == "hel":
        return HamiltonianEcho(model, loss, mode="centered", checkpoint_every=None)
    if name == "hel_two_pass":
        return HamiltonianEcho(model, loss, mode="two_pass")
    if name == "tbptt_k10":
        return TruncatedBPTT(model, loss, k=10)
    if name == "tbptt_T/8":
        return TruncatedBPTT(model, loss, k=max(1, T // 8))
    if name == "eprop_sym":
        return EProp(model, loss, feedback="symmetric")
    if name == "eprop_random":
        return EProp(model, loss, feedback="random")
    if name == "frozen":
        return FrozenRecurrence(model, loss)
    if name.startswith("el"):
        return EchoLearning(
            model, loss, homeostasis=float(name.split("=")[1]) if "=" in name else 0.0
        )
    raise ValueError(name)


def build_model(
    seed: int, m: int, out: int, n: int, dt: float, readout: str, cell: str = "hopfield"
) -> Any:
    """A seeded EchoRNN: cell and head drawn from one generator, zero head bias."""
    g = generator(seed)
    c = (HopfieldOscillatorCell if cell == "hopfield" else RateEchoCell)(m, n, dt=dt, generator=g)
    model = EchoRNN(c, out, readout=readout)
    with torch.no_grad():
        model.head.weight.uniform_(-1, 1, generator=g).mul_(n**-0.5)
        model.head.bias.zero_()
    return model


def train(
    method: str,
    data: tuple,
    cfg: dict,
    seed: int,
    probe: tuple | None = None,
    cell: str = "hopfield",
) -> dict[str, Any]:
    """Train one model; returns metrics and (optionally) per-epoch gradient cosines."""
    Xtr, ytr, Xte, yte, task = data
    m = Xtr.shape[2]
    out = int(ytr.max()) + 1 if task == "clf" else ytr.shape[2]
    readout = "mean" if task == "clf" else "sequence"
    model = build_model(seed, m, out, cfg["n"], cfg["dt"], readout, cell)
    loss = torch.nn.CrossEntropyLoss() if task == "clf" else torch.nn.MSELoss()
    T = Xtr.shape[1]
    est = make_estimator(method, model, loss, T)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    gen = generator(1000 + seed)
    n = Xtr.shape[0]
    bs = cfg["batch"] if cfg["batch"] else n
    cosines = []
    t0 = time.perf_counter()
    for _ in range(cfg["epochs"]):
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n, bs):
            idx = perm[i : i + bs]
            opt.zero_grad()
            est.backward(Xtr[idx], ytr[idx])
            opt.step()
        if probe is not None:
            xp, yp, probe_ests = probe
            ests = {k: make_estimator(k, model, loss, T) for k in probe_ests}
            res = compare_estimators(model, (xp, yp), loss, ests)
            cosines.append({k: v["cosine"] for k, v in res.items()})
    wall = time.perf_counter() - t0
    with torch.no_grad():
        pred = model(Xte)
        if task == "clf":
            metric = float((pred.argmax(1) == yte).float().mean())
        else:
            metric = float(((pred - yte) ** 2).mean() / yte.var())
    return {"metric": metric, "wall": wall, "cosines": cosines, "model": model, "loss": loss}


def to_t(*arrs: np.ndarray) -> list[Any]:
    return [torch.from_numpy(np.ascontiguousarray(a)) for a in arrs]


@functools.cache
def load_task(name: str, quick: bool) -> tuple:
    """``(X_train, y_train, X_test, y_test, "clf" | "reg")`` as tensors (loaded once)."""
    if name == "sequential_digits":
        Xtr, Xte, ytr, yte = sequential_digits()
        if quick:
            Xtr, ytr, Xte, yte = Xtr[:256], ytr[:256], Xte[:200], yte[:200]
        return (*to_t(Xtr, ytr, Xte, yte), "clf")
    if name in ("gunpoint", "basic_motions"):
        Xtr, ytr = load_aeon(name, "train")
        Xte, yte = load_aeon(name, "test")
        return (*to_t(Xtr, ytr, Xte, yte), "clf")
    if name == "delayed_recall":  # the spec's 2000/500 split; training on the first n_train
        ntr, split, nte = (128, 128, 64) if quick else (CONFIG[name]["n_train"], 2000, 500)
        u, y = delayed_recall(split + nte, T=100, delay=20, random_state=0)
        return (*to_t(u[:ntr], y[:ntr], u[split:], y[split:]), "reg")
    raise ValueError(name)


def trivial_score(data: tuple) -> float:
    """What a model that learned nothing scores on the test set.

    Classification: the accuracy of always predicting the most frequent test class.
    Regression: the NMSE of predicting the training targets' mean at every step.
    """
    _, ytr, _, yte, task = data
    if task == "clf":
        return float(torch.bincount(yte).max()) / len(yte)
    return float(((ytr.mean(0) - yte) ** 2).mean() / yte.var())


def gap_claim(text: str, a: list, b: list, trivial: float, clf: bool, limit: float) -> Claim:
    """``max_seed |a - b| <= limit``; "not measured" when both sides learned nothing.

    Two models at the trivial score (majority class, or the NMSE of the mean) agree without
    telling anything about their learning rules.
    """
    gap = max(abs(x - y) for x, y in zip(a, b, strict=True))
    untrained = all(v <= trivial if clf else v >= trivial for v in a + b)
    note = f" (both at the trivial score {trivial:.4f})" if untrained else ""
    return check(
        text,
        gap <= limit,
        f"max gap {gap:.4f}{note}",
        inputs=[*a, *b, trivial],
        degenerate=untrained,
    )


_TRAINED: dict[tuple, dict[str, Any]] = {}


def train_seeded(name: str, method: str, seed: int, quick: bool) -> dict[str, Any]:
    """Train ``method`` on task ``name`` after ``seed_everything(seed)``; remembered per run.

    On sequential digits HEL's run also probes the gradient agreement of
    :data:`PROBE_ESTIMATORS` on 64 training samples after every epoch (the grad_agreement
    benchmark reads those probes, so a full run trains HEL once for both records).
    """
    key = (name, method, seed, quick)
    if key not in _TRAINED:
        data = load_task(name, quick)
        probe = None
        if name == "sequential_digits" and method == "hel":
            probe = (data[0][:64], data[1][:64], PROBE_ESTIMATORS)
        methodkit.seed_everything(seed)
        _TRAINED[key] = train(method, data, config(name, quick), seed, probe)
    return _TRAINED[key]
