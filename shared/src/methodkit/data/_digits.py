"""scikit-learn's bundled 8x8 digits (1797 images, 10 classes), as plain arrays.

Needs ``methodkit[data]`` (scikit-learn); the data ships inside scikit-learn, so no
download happens.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from methodkit._seeding import SeedLike, rng


def _load() -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError("digits need scikit-learn: pip install 'methodkit[data]'") from exc
    bunch = load_digits()
    return bunch.data.astype(np.float64), bunch.target.astype(np.int64)


def load_digits_arrays(
    dtype: type[np.floating] = np.float32,
) -> tuple[NDArray[np.floating], NDArray[np.int64]]:
    """Return ``(X, y)``: X of shape (1797, 64) scaled to [0, 1], y integer labels 0..9."""
    X, y = _load()
    return (X / 16.0).astype(dtype), y


def split_digits(
    test_fraction: float = 0.25,
    random_state: SeedLike = 0,
    dtype: type[np.floating] = np.float32,
) -> tuple[NDArray[np.floating], NDArray[np.floating], NDArray[np.int64], NDArray[np.int64]]:
    """Stratified train/test split of the digits: ``(X_train, X_test, y_train, y_test)``.

    Each class is split in the same proportion, so both parts keep the class balance.

    Raises:
        ValueError: If ``test_fraction`` is not in (0, 1).
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    X, y = load_digits_arrays(dtype)
    gen = rng(random_state)
    test_idx = []
    for label in np.unique(y):
        idx = np.flatnonzero(y == label)
        gen.shuffle(idx)
        test_idx.append(idx[: round(test_fraction * idx.size)])
    test = np.sort(np.concatenate(test_idx))
    train = np.setdiff1d(np.arange(y.size), test)
    return X[train], X[test], y[train], y[test]
