"""ImageNet-C-style corruptions for small float images in [0, 1] (numpy/scipy only).

Severity tables are rescaled for 16x16 digits: ImageNet-C's own parameters destroy such small
images (Gaussian noise sigma 0.38 leaves a ViT at 23.6 %, contrast 0.05 at chance). The table
below was calibrated so that level 5 leaves the benchmark's source ViT (bench/run.py) between
35 % and 85 % accuracy on every corruption:

=================  ==========================================  =============================
name               parameter (levels 1..5)                     meaning
=================  ==========================================  =============================
gaussian_noise     0.04, 0.06, 0.08, 0.10, 0.12                additive N(0, sigma^2)
shot_noise         60, 30, 15, 8, 4                            Poisson(x c) / c
impulse_noise      0.02, 0.035, 0.05, 0.065, 0.08              salt-and-pepper fraction
defocus_blur       0.6, 0.8, 1.0, 1.25, 1.5                    Gaussian blur sigma (pixels)
motion_blur        2, 3, 4, 5, 6                               line kernel length (pixels)
contrast           0.9, 0.85, 0.8, 0.7, 0.6                    (x - mean) c + mean
brightness         0.02, 0.04, 0.06, 0.08, 0.1                 x + b
pixelate           12, 10, 9, 7, 6                             block-average side (pixels)
elastic_transform  alpha 0.5, 0.7, 0.9, 1.1, 1.3 (sigma 1.0)   displacement field (pixels)
=================  ==========================================  =============================

The source ViT is very sensitive to global intensity changes (contrast, brightness): the
rescaled levels are much milder than ImageNet-C's. Level-5 source accuracies measured by
``bench/run.py --calibrate`` are recorded in the README.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import ndimage

__all__ = ["NAMES", "SEVERITIES", "corrupt"]

SEVERITIES: dict[str, tuple] = {
    "gaussian_noise": (0.04, 0.06, 0.08, 0.10, 0.12),
    "shot_noise": (60, 30, 15, 8, 4),
    "impulse_noise": (0.02, 0.035, 0.05, 0.065, 0.08),
    "defocus_blur": (0.6, 0.8, 1.0, 1.25, 1.5),
    "motion_blur": (2, 3, 4, 5, 6),
    "contrast": (0.9, 0.85, 0.8, 0.7, 0.6),
    "brightness": (0.02, 0.04, 0.06, 0.08, 0.1),
    "pixelate": (12, 10, 9, 7, 6),
    "elastic_transform": ((0.5, 1.0), (0.7, 1.0), (0.9, 1.0), (1.1, 1.0), (1.3, 1.0)),
}
NAMES: tuple[str, ...] = tuple(SEVERITIES)

Array = NDArray[np.floating]


def _gaussian_noise(x: Array, s: float, g: np.random.Generator) -> Array:
    return x + g.normal(0.0, s, x.shape)


def _shot_noise(x: Array, c: float, g: np.random.Generator) -> Array:
    return g.poisson(np.clip(x, 0, 1) * c) / c


def _impulse_noise(x: Array, amount: float, g: np.random.Generator) -> Array:
    out = x.copy()
    u = g.random(x.shape)
    out[u < amount / 2] = 0.0
    out[(u >= amount / 2) & (u < amount)] = 1.0
    return out


def _defocus_blur(x: Array, s: float, g: np.random.Generator) -> Array:
    return ndimage.gaussian_filter(x, sigma=(0, s, s), mode="constant")


def _motion_blur(x: Array, length: int, g: np.random.Generator) -> Array:
    out = np.empty_like(x)
    k = int(length)
    for i in range(x.shape[0]):  # one random direction per image
        angle = g.uniform(0, np.pi)
        kern = np.zeros((2 * k + 1, 2 * k + 1))
        for t in np.linspace(-k / 2, k / 2, 4 * k + 1):
            kern[round(k + t * np.sin(angle)), round(k + t * np.cos(angle))] = 1.0
        out[i] = ndimage.convolve(x[i], kern / kern.sum(), mode="constant")
    return out


def _contrast(x: Array, c: float, g: np.random.Generator) -> Array:
    mean = x.mean(axis=(1, 2), keepdims=True)
    return (x - mean) * c + mean


def _brightness(x: Array, b: float, g: np.random.Generator) -> Array:
    return x + b


def _pixelate(x: Array, side: int, g: np.random.Generator) -> Array:
    H, W = x.shape[1:]
    ri = np.arange(H) * side // H  # block index of each row / column
    ci = np.arange(W) * side // W
    sums = np.zeros((side, side, x.shape[0]))  # images last: the index is (rows, columns)
    np.add.at(sums, (ri[:, None], ci[None, :]), x.transpose(1, 2, 0))
    sums = sums.transpose(2, 0, 1)
    counts = np.zeros((side, side))
    np.add.at(counts, (ri[:, None], ci[None, :]), 1.0)
    return (sums / counts)[:, ri[:, None], ci[None, :]]


def _elastic(x: Array, params: tuple[float, float], g: np.random.Generator) -> Array:
    alpha, sigma = params
    H, W = x.shape[1:]
    yy, xx = np.meshgrid(np.arange(H), np.arange(W), indexing="ij")
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        dy = ndimage.gaussian_filter(g.uniform(-1, 1, (H, W)), sigma) * alpha / 0.25
        dx = ndimage.gaussian_filter(g.uniform(-1, 1, (H, W)), sigma) * alpha / 0.25
        coords = np.stack([yy + dy, xx + dx])
        out[i] = ndimage.map_coordinates(x[i], coords, order=1, mode="constant")
    return out


# the parameter's type is the corruption's own (a float, an int or a pair: see SEVERITIES)
_FNS: dict[str, Callable[[Array, Any, np.random.Generator], Array]] = {
    "gaussian_noise": _gaussian_noise,
    "shot_noise": _shot_noise,
    "impulse_noise": _impulse_noise,
    "defocus_blur": _defocus_blur,
    "motion_blur": _motion_blur,
    "contrast": _contrast,
    "brightness": _brightness,
    "pixelate": _pixelate,
    "elastic_transform": _elastic,
}


def corrupt(
    images: Array,
    name: str,
    severity: int,
    rng: int | np.random.Generator | None = None,
) -> Array:
    """Apply corruption ``name`` at ``severity`` (1..5) to images in [0, 1].

    Args:
        images: Float array (N, H, W) or (N, C, H, W) with values in [0, 1].
        name: One of :data:`NAMES`.
        severity: 1 (mild) to 5 (strongest).
        rng: Seed or generator for the random corruptions.

    Returns:
        Array of the same shape and dtype, clipped to [0, 1].

    Raises:
        ValueError: On an unknown ``name``, a ``severity`` outside 1..5, or a wrong shape.
    """
    if name not in _FNS:
        raise ValueError(f"unknown corruption name {name!r}; choose from {NAMES}")
    if isinstance(severity, bool) or severity not in (1, 2, 3, 4, 5):
        raise ValueError(f"severity must be an int in 1..5, got {severity!r}")
    x = np.asarray(images)
    if x.ndim not in (3, 4):
        raise ValueError(f"images must have shape (N, H, W) or (N, C, H, W), got {x.shape}")
    g = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    flat = x.reshape(-1, *x.shape[-2:]).astype(np.float64)
    out = _FNS[name](flat, SEVERITIES[name][severity - 1], g)
    return np.clip(out, 0.0, 1.0).reshape(x.shape).astype(x.dtype)
