"""Benchmark helper: forward passes a zeroth-order optimizer needs to reach a target loss.

Bench code, not part of the wheel; ``tests/test_bench_helper.py`` tests it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from engine_zo._base import ZOOptimizer, check_int


@dataclass
class TargetRun:
    """Result of :func:`forward_passes_to_target`.

    Attributes:
        forward_passes: Forward passes (closure calls) when the target was first reached,
            or ``None`` if the budget ran out first.
        curve: ``(forward_passes, loss)`` pairs at every evaluation (the first at 0).
        final_loss: Loss at the last evaluation.
        diverged: True if the loss became non-finite (the run stops there).
    """

    forward_passes: int | None
    curve: list[tuple[int, float]] = field(default_factory=list)
    final_loss: float = float("nan")
    diverged: bool = False


def forward_passes_to_target(
    make_opt: Callable[[Iterable[torch.nn.Parameter]], ZOOptimizer],
    model_fn: Callable[[], torch.nn.Module],
    loss_fn: Callable[[torch.nn.Module], torch.Tensor],
    target: float,
    budget: int,
    eval_every: int,
) -> TargetRun:
    """Train ``model_fn()`` with ``make_opt(params)`` until ``loss_fn(model) <= target``.

    The loss is checked at 0 and every ``eval_every`` forward passes of the optimizer
    (evaluation passes are not counted).

    Args:
        make_opt: Builds the optimizer from the model's parameters.
        model_fn: Builds a fresh model (same initial weights for every method).
        loss_fn: ``loss_fn(model)``: the (full-batch) training loss, forward only.
        target: Target loss.
        budget: Maximum optimizer forward passes.
        eval_every: Evaluation period in forward passes.

    Returns:
        A :class:`TargetRun` with the count (or ``None``) and the loss curve.

    Raises:
        ValueError: If ``budget`` or ``eval_every`` < 1.
    """
    check_int("budget", budget, 1)
    check_int("eval_every", eval_every, 1)
    model = model_fn()
    opt = make_opt(model.parameters())

    def closure() -> Any:
        return loss_fn(model)

    with torch.no_grad():
        loss = float(loss_fn(model))
    run = TargetRun(None, [(0, loss)], loss)
    if loss <= target:
        run.forward_passes = 0
        return run
    next_eval = eval_every
    while opt.forward_passes < budget:
        try:
            opt.step(closure)
        except ValueError:  # non-finite loss: diverged
            run.diverged = True
            run.final_loss = float("inf")
            return run
        if opt.forward_passes >= next_eval:
            next_eval += eval_every
            with torch.no_grad():
                loss = float(loss_fn(model))
            run.curve.append((opt.forward_passes, loss))
            run.final_loss = loss
            if not loss < float("inf"):
                run.diverged = True
                return run
            if loss <= target:
                run.forward_passes = opt.forward_passes
                return run
    return run
