"""Boundary checks shared by the modules (package-internal, public names)."""

from __future__ import annotations

import math

import torch


def check_finite(x: torch.Tensor, name: str) -> None:
    """Raise ``ValueError`` if ``x`` holds NaN or inf."""
    if not torch.isfinite(x).all():
        bad = int((~torch.isfinite(x)).sum())
        raise ValueError(f"{name} must be finite, but it holds {bad} NaN/inf value(s)")


def check_nonneg(value: float, name: str) -> float:
    """Raise ``ValueError`` unless ``value`` is a finite number >= 0."""
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def check_positive_int(value: int, name: str, minimum: int = 1) -> int:
    """Raise ``ValueError`` unless ``value`` is an int >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def check_choice(value: str, name: str, allowed: tuple[str, ...]) -> str:
    """Raise ``ValueError`` unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value
