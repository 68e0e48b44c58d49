"""Scalar boundary checks: an int or a finite real in a range, with errors that name it.

Used by edit-ris, eva-cap and plvm (and planned for evochamber and eva-agent), which carried
near-identical copies. Standard library only: NumPy scalars register as
:class:`numbers.Integral` / :class:`numbers.Real`, so ``np.int64`` and ``np.float32`` pass
without importing NumPy here; ``bool`` (and ``np.bool_``) is refused, as is an integral float
such as ``3.0`` where an int is asked for.

Every error names the argument and the value received; a :class:`ValueError` also gives the
allowed range in interval notation (``[1, inf)``, ``(0.0, 1.0]``). NaN and infinities are
refused before the range is looked at, because NaN compares False with every bound.

Example:
    >>> from methodkit.checks import check_int, check_real
    >>> check_int("steps", 10, low=1)
    10
    >>> check_real("lr", 1e-3, low=0.0, low_open=True)
    0.001
"""

from __future__ import annotations

import math
from numbers import Integral, Real

__all__ = ["check_int", "check_real"]


def _interval(low: str | None, high: str | None, low_open: bool, high_open: bool) -> str:
    """``[low, high]`` with ``(``/``)`` for an open or a missing (infinite) side."""
    left = "(" if low_open or low is None else "["
    right = ")" if high_open or high is None else "]"
    return f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"


def _type_error(name: str, kind: str, value: object) -> TypeError:
    why = " (a bool is not accepted)" if type(value).__name__ in ("bool", "bool_") else ""
    return TypeError(f"{name} must be {kind}, got {value!r} of type {type(value).__name__}{why}")


def check_int(name: str, value: object, low: int | None = None, high: int | None = None) -> int:
    """``value`` as a Python int in ``[low, high]`` (a missing bound is unbounded).

    Accepts ``int`` and NumPy integer scalars; refuses ``bool``, floats (also ``3.0``) and
    everything else.

    Args:
        name: The argument's name, used in the error message.
        value: What the caller passed.
        low: Smallest allowed value (inclusive), or None for no lower bound.
        high: Largest allowed value (inclusive), or None for no upper bound.

    Returns:
        ``int(value)``.

    Raises:
        TypeError: If ``value`` is a bool or not an integer.
        ValueError: If it lies outside ``[low, high]``.

    Example:
        >>> import numpy as np
        >>> check_int("batch_size", np.int64(32), low=1)
        32
        >>> check_int("batch_size", 0, low=1)
        Traceback (most recent call last):
        ...
        ValueError: batch_size must be an int in [1, inf), got 0
        >>> check_int("steps", 2.0)
        Traceback (most recent call last):
        ...
        TypeError: steps must be an int, got 2.0 of type float
    """
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise _type_error(name, "an int", value)
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        lo = None if low is None else str(int(low))
        hi = None if high is None else str(int(high))
        interval = _interval(lo, hi, False, False)
        raise ValueError(f"{name} must be an int in {interval}, got {value!r}")
    return v


def check_real(
    name: str,
    value: object,
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` as a finite float in ``[low, high]`` (each side open on request).

    Accepts ``int``, ``float``, NumPy integer and floating scalars and other
    :class:`numbers.Real` (``Fraction``); refuses ``bool``, complex numbers, strings, arrays
    and tensors. NaN and +-inf are refused first, whatever the bounds.

    Args:
        name: The argument's name, used in the error message.
        value: What the caller passed.
        low: Lower bound, or None for none (``-inf`` also means none).
        high: Upper bound, or None for none (``inf`` also means none).
        low_open: Exclude ``low`` itself (``(low, ...``), e.g. a learning rate ``> 0``.
        high_open: Exclude ``high`` itself (``..., high)``).

    Returns:
        ``float(value)``.

    Raises:
        TypeError: If ``value`` is a bool or not a real number.
        ValueError: If it is NaN or infinite, or lies outside the interval.

    Example:
        >>> check_real("threshold", 0.5, 0.0, 1.0)
        0.5
        >>> check_real("lr", 0, low=0.0, low_open=True)
        Traceback (most recent call last):
        ...
        ValueError: lr must be in (0.0, inf), got 0
        >>> check_real("noise", float("nan"), low=0.0)
        Traceback (most recent call last):
        ...
        ValueError: noise must be finite and in [0.0, inf), got nan
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise _type_error(name, "a real number", value)
    lo = None if low is None or low == -math.inf else float(low)
    hi = None if high is None or high == math.inf else float(high)
    interval = _interval(
        None if lo is None else repr(lo), None if hi is None else repr(hi), low_open, high_open
    )
    try:
        v = float(value)
    except OverflowError:  # an int beyond float range, e.g. 10**400
        v = math.inf
    if not math.isfinite(v):  # first: NaN compares False with every bound
        raise ValueError(f"{name} must be finite and in {interval}, got {value!r}")
    too_low = lo is not None and (v <= lo if low_open else v < lo)
    too_high = hi is not None and (v >= hi if high_open else v > hi)
    if too_low or too_high:
        raise ValueError(f"{name} must be in {interval}, got {value!r}")
    return v
