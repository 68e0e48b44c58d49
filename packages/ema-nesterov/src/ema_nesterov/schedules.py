"""Lookahead-size schedules: warmup-stable-decay style zeroing and a LambdaLR-like scheduler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ema_nesterov._ema_nesterov import EMANesterov


def _check_steps(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return value


def constant_schedule(value: float = 1.0) -> Callable[[int], float]:
    """Return ``step -> value`` (the default lookahead multiplier is 1).

    Raises:
        ValueError: If ``value`` is negative or non-finite.
    """
    value = float(value)
    if not value >= 0.0 or value == float("inf"):
        raise ValueError(f"value must be a finite number >= 0, got {value}")

    def schedule(step: int) -> float:
        return value

    return schedule


def wsd_lookahead_schedule(
    total_steps: int, warmup_steps: int, decay_steps: int
) -> Callable[[int], float]:
    """Return the paper's lookahead schedule: 0 in warm-up and in the final decay, else 1.

    The multiplier for step ``t`` (0-based, the lookahead applied before step ``t``'s
    gradient) is ``0`` for ``t < warmup_steps`` or ``t >= total_steps - decay_steps`` and
    ``1`` otherwise, matching a warmup-stable-decay learning-rate schedule on the same phases
    (exact phase boundaries inferred).

    Args:
        total_steps: Number of training steps.
        warmup_steps: Learning-rate warm-up length.
        decay_steps: Length of the final learning-rate decay.

    Returns:
        The schedule ``step -> {0.0, 1.0}``.

    Raises:
        ValueError: If a length is negative or warm-up plus decay exceed ``total_steps``.
    """
    _check_steps("total_steps", total_steps)
    _check_steps("warmup_steps", warmup_steps)
    _check_steps("decay_steps", decay_steps)
    if warmup_steps + decay_steps > total_steps:
        raise ValueError(
            f"warmup_steps + decay_steps must be <= total_steps, got {warmup_steps} + "
            f"{decay_steps} > {total_steps}"
        )
    stop = total_steps - decay_steps

    def schedule(step: int) -> float:
        return 1.0 if warmup_steps <= step < stop else 0.0

    return schedule


class BetaScheduler:
    """Set every group's ``ema_beta`` to ``initial_ema_beta * fn(epoch)``, like ``LambdaLR``.

    Call :meth:`step` after ``opt.step()``; the new lookahead is applied to the parameters at
    once (:meth:`EMANesterov.sync_lookahead`), so the next gradient is taken there.

    Args:
        optimizer: The :class:`EMANesterov` wrapper.
        fn: ``epoch -> multiplier >= 0`` (or one function per parameter group).

    Raises:
        TypeError: If ``optimizer`` is not an ``EMANesterov`` or ``fn`` is not callable.
        ValueError: If the number of functions differs from the number of groups.

    Example:
        >>> import torch
        >>> from ema_nesterov import BetaScheduler, EMANesterov
        >>> opt = EMANesterov(torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1))
        >>> sched = BetaScheduler(opt, lambda epoch: min(1.0, epoch / 10))
        >>> opt.param_groups[0]["ema_beta"]
        0.0
    """

    def __init__(
        self,
        optimizer: EMANesterov,
        fn: Callable[[int], float] | list[Callable[[int], float]],
    ) -> None:
        if not isinstance(optimizer, EMANesterov):
            raise TypeError(f"optimizer must be an EMANesterov, got {type(optimizer).__name__}")
        fns = list(fn) if isinstance(fn, list | tuple) else [fn] * len(optimizer.param_groups)
        if len(fns) != len(optimizer.param_groups):
            raise ValueError(f"expected {len(optimizer.param_groups)} functions, got {len(fns)}")
        if not all(callable(f) for f in fns):
            raise TypeError("fn must be callable (epoch -> multiplier)")
        self.optimizer = optimizer
        self.fns = fns
        for group in optimizer.param_groups:
            group.setdefault("initial_ema_beta", group["ema_beta"])
        self.last_epoch = -1
        self.step()

    def get_beta(self) -> list[float]:
        """The ``ema_beta`` of every group for the current epoch."""
        out = []
        for group, f in zip(self.optimizer.param_groups, self.fns, strict=True):
            mult = float(f(self.last_epoch))
            if not mult >= 0.0 or mult == float("inf"):
                raise ValueError(f"fn({self.last_epoch}) returned {mult}; must be finite >= 0")
            out.append(group["initial_ema_beta"] * mult)
        return out

    def step(self) -> None:
        """Advance one epoch/step, set ``ema_beta`` and re-apply the lookahead."""
        self.last_epoch += 1
        for group, beta in zip(self.optimizer.param_groups, self.get_beta(), strict=True):
            group["ema_beta"] = beta
        self.optimizer.sync_lookahead()

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's state (the functions are not saved, as in ``LambdaLR``)."""
        return {"last_epoch": self.last_epoch}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output."""
        self.last_epoch = int(state_dict["last_epoch"])


__all__ = ["BetaScheduler", "constant_schedule", "wsd_lookahead_schedule"]
