"""Plumbing shared by the optimizer wrappers: checking base optimizers and sharing their groups."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch


def as_base_list(
    base_optimizer: torch.optim.Optimizer | Sequence[torch.optim.Optimizer],
    wrapper_cls: type,
) -> list[torch.optim.Optimizer]:
    """Return the base optimizers as a list, validating types and disjoint parameters.

    Raises:
        TypeError: If an entry is not a ``torch.optim.Optimizer`` or is itself a wrapper of
            type ``wrapper_cls``.
        ValueError: If the sequence is empty or two bases share a parameter.
    """
    if isinstance(base_optimizer, torch.optim.Optimizer):
        bases = [base_optimizer]
    elif isinstance(base_optimizer, Sequence) and not isinstance(base_optimizer, str | bytes):
        bases = list(base_optimizer)
        if not bases:
            raise ValueError("base_optimizer must not be an empty sequence")
    else:
        raise TypeError(
            "base_optimizer must be a torch.optim.Optimizer or a sequence of them, "
            f"got {type(base_optimizer).__name__}"
        )
    seen: dict[int, int] = {}
    for i, base in enumerate(bases):
        if not isinstance(base, torch.optim.Optimizer):
            raise TypeError(
                f"base_optimizer[{i}] must be a torch.optim.Optimizer, got {type(base).__name__}"
            )
        if isinstance(base, wrapper_cls):
            raise TypeError(
                f"base_optimizer[{i}] is already a {type(base).__name__}; wrapping a lookahead "
                "wrapper in another one is not supported"
            )
        for group in base.param_groups:
            for p in group["params"]:
                if id(p) in seen:
                    raise ValueError(
                        f"base optimizers {seen[id(p)]} and {i} share a parameter of shape "
                        f"{tuple(p.shape)}; base optimizers must hold disjoint parameters"
                    )
                seen[id(p)] = i
    return bases


def merged_defaults(
    bases: Sequence[torch.optim.Optimizer], extra: dict[str, Any]
) -> dict[str, Any]:
    """Defaults of the bases (the first base wins on a clash) plus the wrapper's own ones.

    Schedulers such as ``OneCycleLR(cycle_momentum=True)`` inspect ``optimizer.defaults`` to
    decide whether the optimizer has ``momentum`` or ``betas``; exposing the base defaults lets
    them drive the base optimizer through the shared groups.
    """
    out: dict[str, Any] = {}
    for base in reversed(bases):
        out.update(base.defaults)
    out.update(extra)
    return out


def check_unit_interval(name: str, value: float) -> float:
    """Return ``value`` as float if it lies in ``[0, 1)``, else raise ``ValueError``."""
    value = float(value)
    if not math.isfinite(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a finite number in [0, 1), got {value}")
    return value


def check_nonneg(name: str, value: float) -> float:
    """Return ``value`` as float if it is finite and >= 0, else raise ``ValueError``."""
    value = float(value)
    if not math.isfinite(value) or value < 0.0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return value


def check_sparse(params: Sequence[torch.Tensor], wrapper: str) -> None:
    """Raise ``RuntimeError`` if a parameter carries a sparse gradient."""
    for p in params:
        if p.grad is not None and p.grad.is_sparse:
            raise RuntimeError(f"{wrapper} does not support sparse gradients")
