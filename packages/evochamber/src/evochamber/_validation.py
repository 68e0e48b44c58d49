"""Boundary checks shared by the configuration objects: each names the argument and the range."""

from __future__ import annotations

import math
from numbers import Real


def check_real(name: str, value: object, low: float | None = None, high: float | None = None,
               *, low_open: bool = False) -> float:  # fmt: skip
    """``value`` as a float; TypeError unless a real number, ValueError unless finite and in range.

    ``low``/``high`` bound it (closed interval unless ``low_open``).
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    too_low = low is not None and (v <= low if low_open else v < low)
    too_high = high is not None and v > high
    if too_low or too_high:
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        bracket = "(" if low_open or low is None else "["
        close = ")" if high is None else "]"
        raise ValueError(f"{name} must be in {bracket}{lo}, {hi}{close}, got {value!r}")
    return v


def check_int(name: str, value: object, low: int) -> int:
    """``value`` as an int; TypeError unless an integer (not a bool), ValueError below ``low``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_bool(name: str, value: object) -> bool:
    """TypeError unless ``value`` is a bool."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value
