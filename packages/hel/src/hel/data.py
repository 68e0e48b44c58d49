"""Offline sequence data: pixel-sequential digits, delayed recall, aeon's bundled UCR/UEA sets.

All loaders return NumPy arrays in batch-first layout ``(n, T, channels)``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from methodkit import rng
from methodkit.data import split_digits

__all__ = ["AEON_DATASETS", "delayed_recall", "load_aeon", "sequential_digits", "to_batch_first"]

AEON_DATASETS = {
    "gunpoint": "load_gunpoint",
    "basic_motions": "load_basic_motions",
    "italy_power_demand": "load_italy_power_demand",
    "arrow_head": "load_arrow_head",
    "osuleaf": "load_osuleaf",
    "acsf1": "load_acsf1",
    "unit_test": "load_unit_test",
}


def to_batch_first(X: NDArray[np.floating]) -> NDArray[np.float32]:
    """aeon/sktime numpy3D ``(n_cases, n_channels, n_timepoints)`` -> ``(n, T, channels)``.

    Raises:
        ValueError: If ``X`` is not 3-D.
    """
    X = np.asarray(X)
    if X.ndim != 3:
        raise ValueError(
            f"X must be numpy3D (n_cases, n_channels, n_timepoints), got shape {X.shape}"
        )
    return np.ascontiguousarray(X.transpose(0, 2, 1), dtype=np.float32)


def sequential_digits(
    test_fraction: float = 0.2, random_state: int = 0
) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.int64], NDArray[np.int64]]:
    """scikit-learn's 8x8 digits read pixel by pixel: ``T = 64``, one channel, values in [0, 1].

    Returns:
        ``(X_train, X_test, y_train, y_test)`` with X shaped ``(n, 64, 1)``; stratified split
        (1438 / 359 with the defaults: per-class rounding).
    """
    Xtr, Xte, ytr, yte = split_digits(test_fraction, random_state, np.float32)
    return Xtr[:, :, None], Xte[:, :, None], ytr, yte


def delayed_recall(
    n: int, T: int = 100, delay: int = 20, cutoff: float = 0.1, random_state: int | None = 0
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """Delayed-recall regression: low-pass-filtered noise ``u``, target ``y_t = u_{t-delay}``.

    The noise is filtered with a first-order low-pass ``v_t = (1 - c) v_{t-1} + c xi_t`` and
    scaled to unit variance; the target is zero for ``t < delay``.

    Args:
        n: Number of sequences (>= 1).
        T: Length (> delay).
        delay: Recall delay in steps (>= 0).
        cutoff: Filter coefficient ``c`` in (0, 1].
        random_state: Seed.

    Returns:
        ``(u, y)`` both ``(n, T, 1)`` float32.
    """
    if n < 1 or delay < 0 or delay >= T:
        raise ValueError(f"need n >= 1 and 0 <= delay < T, got n={n}, T={T}, delay={delay}")
    if not 0 < cutoff <= 1:
        raise ValueError(f"cutoff must be in (0, 1], got {cutoff}")
    gen = rng(random_state)
    xi = gen.standard_normal((n, T + 50))
    v = np.zeros_like(xi)
    for t in range(1, T + 50):
        v[:, t] = (1 - cutoff) * v[:, t - 1] + cutoff * xi[:, t]
    u = v[:, 50:]
    u = u / u.std()
    y = np.zeros_like(u)
    y[:, delay:] = u[:, : T - delay]
    return u[:, :, None].astype(np.float32), y[:, :, None].astype(np.float32)


def load_aeon(
    name: str, split: str = "train", znormalize: bool = True
) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """Load a UCR/UEA set bundled with aeon (offline) in batch-first layout.

    Args:
        name: One of :data:`AEON_DATASETS` (e.g. ``"gunpoint"``, ``"basic_motions"``).
        split: ``"train"`` or ``"test"``.
        znormalize: Standardise each channel of each series (zero mean, unit variance).

    Returns:
        ``(X, y)``: ``X`` ``(n, T, channels)`` float32, ``y`` integer labels ``0..k-1``
        (sorted class names).

    Raises:
        ImportError: If aeon is not installed (``pip install "hel[data]"``).
        ValueError: On an unknown name or split.
    """
    if name not in AEON_DATASETS:
        raise ValueError(f"name must be one of {sorted(AEON_DATASETS)}, got {name!r}")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    try:
        import aeon.datasets as ds
    except ImportError as exc:
        raise ImportError("load_aeon needs aeon: pip install 'hel[data]'") from exc
    X, y = getattr(ds, AEON_DATASETS[name])(split=split)
    X = np.asarray(X, dtype=np.float64)
    if znormalize:
        X = (X - X.mean(axis=2, keepdims=True)) / (X.std(axis=2, keepdims=True) + 1e-8)
    classes = np.unique(y)
    labels = np.searchsorted(classes, y).astype(np.int64)
    return to_batch_first(X), labels
