"""Boundary checks shared by the events, rewards, trainers and the synthetic world."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from methodkit.checks import check_real

__all__ = ["check_texts", "check_weights"]


def check_weights(name: str, weights: Any, n: int, *, nonnegative: bool = True) -> tuple:
    """``n`` finite weights (``>= 0`` and not all zero unless ``nonnegative=False``).

    Raises:
        TypeError: If ``weights`` is not a sequence of real numbers.
        ValueError: On the wrong length, a NaN/infinite or negative entry, or all zeros.
    """
    if isinstance(weights, (str, bytes)) or not isinstance(weights, (Sequence, np.ndarray)):
        raise TypeError(f"{name} must be a sequence of {n} numbers, got {weights!r}")
    if len(weights) != n:
        raise ValueError(f"{name} must have {n} entries, got {len(weights)}")
    low = 0.0 if nonnegative else -math.inf
    out = tuple(check_real(f"{name}[{i}]", w, low) for i, w in enumerate(weights))
    if nonnegative and not any(out):
        raise ValueError(f"{name} are all zero: the total reward would be 0 for every caption")
    return out


def check_texts(name: str, texts: Any) -> list[str]:
    """A list of str from a sequence of str (a single str is refused).

    Raises:
        TypeError: For a single str or a non-str entry.
    """
    if isinstance(texts, str):
        raise TypeError(f"{name} must be a sequence of str, not a single str")
    try:
        out = list(texts)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of str, got {type(texts).__name__}") from None
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"{name}[{i}] must be a str, got {type(t).__name__}")
    return out
