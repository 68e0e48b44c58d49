"""Boundary checks shared by the modules (clear errors naming the argument and the value)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ENCODERS = ("deepsets", "gru")
FUSIONS = ("poe", "moe", "concat")
DECODERS = ("switch_policy", "switch_policy+gaussian")


def check_fraction(tau: float, name: str = "tau") -> float:
    """``tau`` must be a number in ``(0, 1]``."""
    try:
        t = float(tau)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name} must be a number in (0, 1], got {tau!r}") from e
    if not 0.0 < t <= 1.0:
        raise ValueError(f"{name} must be in (0, 1], got {tau}")
    return t


def check_progress(p: np.ndarray, name: str) -> None:
    """Progress values must lie in ``[0, 1]``."""
    p = np.asarray(p, dtype=np.float64)
    bad = ~((p >= 0.0) & (p <= 1.0))
    if bad.any():
        raise ValueError(
            f"{name} must be in [0, 1]; found {int(bad.sum())} value(s) outside, e.g. {p[bad][0]!r}"
        )


def check_binary(y: object, name: str = "y", allow_missing: bool = False) -> np.ndarray:
    """Labels as a 1-D float array of 0/1 (NaN allowed for unknown labels when asked)."""
    try:
        arr = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name} must be numeric 0/1 labels, got {_describe(y)}") from e
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one label per person), got shape {arr.shape}")
    vals = arr[~np.isnan(arr)] if allow_missing else arr
    if not np.all((vals == 0) | (vals == 1)):
        uniq = np.unique(vals[~((vals == 0) | (vals == 1))])[:5]
        raise ValueError(f"{name} must be binary (0/1); found values {uniq.tolist()}")
    return arr


def check_latent_dim(d: object) -> int:
    """``latent_dim`` must be an integer >= 1."""
    if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
        raise ValueError(f"latent_dim must be an integer >= 1, got {d!r}")
    return int(d)


def check_choice(value: str, allowed: Sequence[str], name: str) -> str:
    """``value`` must be one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"unknown {name} {value!r}; choose one of {list(allowed)}")
    return value


def _describe(x: object) -> str:
    dtype = getattr(x, "dtype", None)
    return f"{type(x).__name__}" + (f" of dtype {dtype}" if dtype is not None else "")


def check_finite(a: np.ndarray, name: str) -> None:
    """Every value of ``a`` must be finite (no NaN or inf)."""
    bad = ~np.isfinite(a)
    if bad.any():
        raise ValueError(
            f"{name} must be finite; found {int(bad.sum())} NaN/inf value(s), "
            f"e.g. {a[bad].ravel()[0]!r}"
        )
