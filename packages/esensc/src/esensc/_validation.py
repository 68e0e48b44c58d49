"""Argument checks shared by the explainer and the maskers (package-internal)."""

from __future__ import annotations

import numpy as np


def validate_batch_size(batch_size: int | None) -> int | None:
    """Return ``batch_size`` as an int >= 1 (or None).

    Raises:
        TypeError: If it is neither an int nor None.
        ValueError: If it is < 1.
    """
    if batch_size is None:
        return None
    if isinstance(batch_size, bool) or not isinstance(batch_size, int | np.integer):
        raise TypeError(f"batch_size must be an int or None, got {batch_size!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return int(batch_size)


def is_dataframe(obj: object) -> bool:
    """True for a pandas-like DataFrame (duck-typed, so pandas is never imported)."""
    return hasattr(obj, "columns") and hasattr(obj, "to_numpy") and hasattr(obj, "iloc")


def seeded_rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    """A NumPy generator from an int seed, an existing generator (used as is) or None.

    Raises:
        TypeError: For any other type.
        ValueError: For a negative seed.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return np.random.default_rng()
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(
            f"seed must be None, an int or a numpy.random.Generator, got {type(seed).__name__}"
        )
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    return np.random.default_rng(int(seed))
