"""Argument checks shared by the explainer and the maskers (package-internal)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


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


def shap_subsample(n_rows: int, n_keep: int, seed: int) -> NDArray[np.intp]:
    """The rows ``shap.utils.sample(data, n_keep, random_state=seed)`` keeps, in its order.

    shap subsamples a background with ``sklearn.utils.shuffle``: a legacy ``RandomState(seed)``
    shuffles ``arange(n_rows)`` and the first ``n_keep`` are kept. Doing the same here gives
    the same background, hence the same base values, as ``shap.maskers.Independent``.

    Raises:
        TypeError: If ``seed`` is not an int.
        ValueError: For a negative seed.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be None or an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    idx = np.arange(n_rows)
    np.random.RandomState(int(seed)).shuffle(idx)  # shap's (sklearn's) legacy stream
    return idx[:n_keep]
