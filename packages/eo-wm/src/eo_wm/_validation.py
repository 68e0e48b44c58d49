"""Boundary checks shared by the modules (package-internal)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike


def check_doy(doy: ArrayLike, name: str = "doy") -> np.ndarray:
    """Return ``doy`` as float64 after checking every value lies in [1, 366]."""
    arr = np.asarray(doy, dtype=np.float64)
    if arr.size and (not np.all(np.isfinite(arr)) or arr.min() < 1 or arr.max() > 366):
        lo, hi = float(np.nanmin(arr)), float(np.nanmax(arr))
        raise ValueError(f"{name} must lie in [1, 366], got values in [{lo}, {hi}]")
    return arr


def check_mask(mask: object, frames_shape: Sequence[int], name: str = "mask") -> None:
    """Check a validity mask: values in {0, 1} and shape ``frames[:-3] + (1,) + frames[-2:]``."""
    raw = getattr(mask, "shape", None)  # a tensor's or an array's shape, without a copy
    shape = tuple(int(n) for n in (raw if raw is not None else np.asarray(mask).shape))
    want = (*tuple(frames_shape[:-3]), 1, *tuple(frames_shape[-2:]))
    if shape != want:
        raise ValueError(f"{name} must have shape {want} to match the frames, got {shape}")
    arr = np.asarray(mask.detach().cpu() if hasattr(mask, "detach") else mask)
    bad = ~np.isin(arr, (0, 1))
    if bad.any():
        raise ValueError(f"{name} values must be 0 or 1 (1 = valid), found {arr[bad].flat[0]!r}")


def band_indices(bands: Sequence[str], red: str = "R", nir: str = "NIR") -> tuple[int, int]:
    """Indices of the red and NIR bands in ``bands``; ValueError when either is missing."""
    names = list(bands)
    missing = [b for b in (red, nir) if b not in names]
    if missing:
        raise ValueError(f"bands {tuple(names)} lack {missing}: NDVI needs a red and a NIR band")
    return names.index(red), names.index(nir)
