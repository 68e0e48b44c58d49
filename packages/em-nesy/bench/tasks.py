"""Multi-digit addition benchmark: one training run, E-step timings and memory probes.

Benchmark code (``bench/``), not part of the em-nesy wheel; ``bench/run.py`` runs the
reproduction on top of these functions.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from em_nesy import (
    ABCSampling,
    AdditionDP,
    BeliefPropagation,
    DigitMLP,
    Enumeration,
    HardEM,
    MultiDigitAddition,
    RejectionSampling,
    digit_accuracy,
    e_step,
    em_loss,
    load_digit_images,
    make_addition_dataset,
    nesy_nll,
    sum_accuracy,
)
from em_nesy._base import warn_if_all_invalid
from methodkit.torch import generator

METHODS = (
    "em_dp",
    "exact_gradient",
    "em_bp",
    "em_rejection",
    "em_abc",
    "hardem_dp",
    "em_enumeration",
    "supervised",
)


def make_engine(
    method: str, program: MultiDigitAddition, seed: int, n_samples: int = 1024, tau: float = 0.5
) -> Any:
    """The E-step engine of a benchmark method (None for gradient baselines)."""
    engines = {
        "em_dp": lambda: AdditionDP(program),
        "em_bp": lambda: BeliefPropagation(program),
        "em_rejection": lambda: RejectionSampling(program, n_samples, generator=seed),
        "em_abc": lambda: ABCSampling(program, n_samples, tau=tau, generator=seed),
        "hardem_dp": lambda: HardEM(AdditionDP(program)),
        "em_enumeration": lambda: Enumeration(program),
    }
    if method in ("exact_gradient", "supervised"):
        return None
    if method not in engines:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    return engines[method]()


def _init_model(seed: int) -> DigitMLP:
    with torch.random.fork_rng():  # seeded init without touching the caller's global RNG
        torch.manual_seed(seed)
        return DigitMLP()


def learned_permutation(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor) -> list:
    """For each true digit, the label the model predicts most often on ``images``."""
    with torch.no_grad():
        pred = model(images).argmax(-1)
    return [int(torch.bincount(pred[labels == d], minlength=10).argmax()) for d in range(10)]


def train_addition(
    method: str,
    n_digits: int,
    seed: int,
    epochs: int,
    n_train: int = 3000,
    n_test: int = 1000,
    batch_size: int = 32,
    lr: float = 1e-3,
    splits: tuple[torch.Tensor, ...] | None = None,
    n_samples: int = 1024,
    tau: float = 0.5,
) -> dict[str, Any]:
    """Train ``DigitMLP`` on N-digit addition with one method and evaluate it.

    Args:
        method: One of :data:`METHODS`.
        n_digits: Digits per operand.
        seed: Seed of the model init, the per-epoch training examples and the samplers.
        epochs: Epochs (each draws ``n_train`` fresh examples from the training images).
        n_train: Examples per epoch.
        n_test: Fixed test examples (seeded by ``n_digits`` only).
        batch_size: Examples per step.
        lr: Adam learning rate.
        splits: Output of :func:`~em_nesy.data.load_digit_images` (loaded if None).
        n_samples: Samples of the sampling engines.
        tau: ABC temperature.

    Returns:
        Final ``sum_accuracy``, ``digit_accuracy``, mean ``epoch_time`` (s), mean E-step time
        per example (s), mean ``acceptance_rate`` / ``invalid_frac`` over training steps, and
        the ``permutation`` learned per true digit.
    """
    program = MultiDigitAddition(n_digits)
    tr_x, tr_y, te_x, te_y = splits if splits is not None else load_digit_images()
    test = make_addition_dataset(te_x, te_y, n_digits, n_test, seed=10_000 + n_digits)
    model = _init_model(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    engine = make_engine(method, program, seed, n_samples, tau)
    epoch_times, e_times, acc_rates, invalid = [], [], [], []
    for epoch in range(epochs):
        data = make_addition_dataset(
            tr_x, tr_y, n_digits, n_train, seed=np.random.default_rng([seed, epoch, n_digits])
        )
        t_epoch = time.perf_counter()
        for start in range(0, n_train, batch_size):
            x = data.images[start : start + batch_size]
            y = data.sums[start : start + batch_size]
            logits = model(x)
            if method == "supervised":
                target = data.digits[start : start + batch_size]
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 10), target.reshape(-1))
            elif method == "exact_gradient":
                loss = nesy_nll(logits, y, program)
            else:
                t0 = time.perf_counter()
                post = e_step(logits, y, engine)
                e_times.append((time.perf_counter() - t0) / x.shape[0])
                acc_rates.append(post.stats.get("acceptance_rate", float("nan")))
                invalid.append(1.0 - float(post.valid.float().mean()))
                warn_if_all_invalid(post.valid, method)
                loss = em_loss(logits, post) if bool(post.valid.any()) else None
            if loss is not None:
                opt.zero_grad()
                loss.backward()
                opt.step()
        epoch_times.append(time.perf_counter() - t_epoch)
    with torch.no_grad():
        pred = model(test.images).argmax(-1)
    return {
        "method": method,
        "n_digits": n_digits,
        "seed": seed,
        "epochs": epochs,
        "sum_accuracy": sum_accuracy(pred, test.sums, n_digits),
        "digit_accuracy": digit_accuracy(pred, test.digits),
        "epoch_time": float(np.mean(epoch_times)),
        "e_time_per_example": float(np.mean(e_times)) if e_times else float("nan"),
        "acceptance_rate": float(np.nanmean(acc_rates))
        if acc_rates and not np.all(np.isnan(acc_rates))
        else float("nan"),
        "invalid_frac": float(np.mean(invalid)) if invalid else 0.0,
        "permutation": learned_permutation(model, te_x, te_y),
    }


def estep_time(method: str, n_digits: int, batch_size: int = 32, repeats: int = 5) -> float:
    """Seconds per example of one E-step, or of one exact-gradient forward+backward.

    ``em_dp``/``em_bp`` time ``engine.posterior``; ``exact_gradient`` times ``nesy_nll`` and
    its backward through the carry recursion. Random logits, median over ``repeats``.
    """
    program = MultiDigitAddition(n_digits)
    gen = generator(n_digits)
    logits = torch.randn(batch_size, 2 * n_digits, 10, generator=gen)
    digits = torch.randint(0, 10, (batch_size, 2 * n_digits), generator=gen).numpy()
    y = torch.from_numpy(program.sum_digits(digits))
    engine = make_engine(method, program, 0)
    times = []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        if engine is None:
            lg = logits.clone().requires_grad_(True)
            nesy_nll(lg, y, program).backward()
        else:
            engine.posterior(logits, y)
        times.append(time.perf_counter() - t0)
    return float(np.median(times[1:])) / batch_size


def saved_tensor_bytes(method: str, n_digits: int, batch_size: int = 32) -> int:
    """Bytes the autograd graph of one training step keeps for backward (EM vs exact gradient)."""
    program = MultiDigitAddition(n_digits)
    model = _init_model(0)
    gen = generator(0)
    x = torch.rand(batch_size, 2 * n_digits, 8, 8, generator=gen)
    digits = torch.randint(0, 10, (batch_size, 2 * n_digits), generator=gen).numpy()
    y = torch.from_numpy(program.sum_digits(digits))
    total = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        total[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logits = model(x)
        if method == "exact_gradient":
            loss = nesy_nll(logits, y, program)
        else:
            loss = em_loss(logits, e_step(logits, y, make_engine(method, program, 0)))
    loss.backward()
    return total[0]


def memory_run(method: str, n_digits: int, batch_size: int = 32, steps: int = 20) -> None:
    """``steps`` training steps of one method: what :func:`methodkit.bench.peak_memory` runs.

    Module-level so that a spawned process can unpickle it; builds its own model and batches.
    """
    program = MultiDigitAddition(n_digits)
    model = _init_model(0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    engine = make_engine(method, program, 0)
    gen = generator(0)
    for _ in range(steps):
        x = torch.rand(batch_size, 2 * n_digits, 8, 8, generator=gen)
        digits = torch.randint(0, 10, (batch_size, 2 * n_digits), generator=gen).numpy()
        y = torch.from_numpy(program.sum_digits(digits))
        logits = model(x)
        if engine is None:
            loss = nesy_nll(logits, y, program)
        else:
            loss = em_loss(logits, e_step(logits, y, engine))
        opt.zero_grad()
        loss.backward()
        opt.step()
