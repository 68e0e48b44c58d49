"""Checks at the public boundary (named errors with the value and what is allowed)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from PIL import Image


def as_rgb(image: Any, name: str = "image") -> Image.Image:
    """``image`` as a PIL RGB image, keeping a PIL image's ``info``.

    Accepted: a PIL image (any mode convertible to RGB), or an array-like (numpy, CPU tensor)
    of shape (H, W) or (H, W, C) with C in 1, 3, 4 (channels last), either integer in
    [0, 255] or float in [0, 1] (what ML code produces; scaled by 255 and rounded, so
    ``uint8 / 255`` round-trips exactly).

    Raises:
        TypeError: If it is neither a PIL image nor a numeric array, or a boolean mask.
        ValueError: If it has zero width or height, a shape other than the above (a
            channels-first (C, H, W) array is named as such), NaN or infinite values, or
            values outside [0, 1] (float) / [0, 255] (integer).
    """
    img = image if isinstance(image, Image.Image) else Image.fromarray(_as_uint8(image, name))
    if img.width == 0 or img.height == 0:
        raise ValueError(f"{name} has zero size: {img.width}x{img.height}")
    if img.mode != "RGB":
        try:
            info = dict(img.info)
            img = img.convert("RGB")
            img.info.update(info)
        except (ValueError, OSError) as e:
            raise TypeError(f"{name} of mode {img.mode!r} is not convertible to RGB: {e}") from e
    return img


def _as_uint8(image: Any, name: str) -> np.ndarray:
    """An array image as uint8 (H, W) or (H, W, 3|4), checked (see :func:`as_rgb`)."""
    kind = "a PIL image or an (H, W) / (H, W, C) array"
    if image is None or isinstance(image, (str, bytes)):
        raise TypeError(f"{name} must be {kind}, got {type(image).__name__}")
    try:
        arr = np.asarray(image)
    except (TypeError, ValueError, RuntimeError):
        raise TypeError(f"{name} must be {kind}, got {type(image).__name__}") from None
    if arr.dtype == bool:
        raise TypeError(f"{name} is a boolean mask, not an image; convert it (mask * 255)")
    if not (np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise TypeError(f"{name} must be a numeric array ({kind}), got dtype {arr.dtype}")
    if arr.ndim == 3 and arr.shape[-1] not in (1, 3, 4) and arr.shape[0] in (1, 3, 4):
        raise ValueError(
            f"{name} of shape {arr.shape} looks channels-first (C, H, W); pass (H, W, C), "
            "e.g. array.transpose(1, 2, 0)"
        )
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[-1] not in (1, 3, 4)):
        raise ValueError(f"{name} must have shape (H, W) or (H, W, C) with C in 1, 3, 4, "
                         f"got {arr.shape}")  # fmt: skip
    if 0 in arr.shape[:2]:
        raise ValueError(f"{name} has zero size: shape {arr.shape}")
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    if np.issubdtype(arr.dtype, np.floating):
        finite = np.isfinite(arr)
        if not finite.all():  # before the range check: NaN compares False with both bounds
            raise ValueError(f"{name} contains {int((~finite).sum())} NaN or infinite values")
        lo, hi = float(arr.min()), float(arr.max())
        if lo < 0.0 or hi > 1.0:
            raise ValueError(
                f"a float {name} must be in [0, 1], got range [{lo:.4g}, {hi:.4g}]; for 0-255 "
                "values pass an integer array (array.astype('uint8'))"
            )
        return np.rint(arr * 255.0).astype(np.uint8)
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi > 255:
        raise ValueError(f"an integer {name} must be in [0, 255], got range [{lo}, {hi}]")
    return arr.astype(np.uint8)


def check_question(question: Any) -> str:
    """The question stripped; raises on a non-string or an empty one."""
    if not isinstance(question, str):
        raise TypeError(f"question must be a str, got {type(question).__name__}")
    q = question.strip()
    if not q:
        raise ValueError("question is empty")
    return q


def clip_region(
    region: Any, size: tuple[int, int], name: str = "region"
) -> tuple[int, int, int, int] | None:
    """``region`` (x0, y0, x1, y1) clipped to an image of ``size`` (w, h).

    Partly outside: clipped, with a warning. Fully outside or empty: None (the caller turns
    that into an ``error`` observation, not a crash).

    Raises:
        TypeError: If ``region`` is not four numbers.
    """
    try:
        x0, y0, x1, y1 = (round(float(v)) for v in region)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be four numbers (x0, y0, x1, y1), got {region!r}") from None
    w, h = size
    cx0, cy0, cx1, cy1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
    if cx1 <= cx0 or cy1 <= cy0:
        return None
    if (cx0, cy0, cx1, cy1) != (x0, y0, x1, y1):
        warnings.warn(
            f"{name} {(x0, y0, x1, y1)} lies partly outside the {w}x{h} image; clipped to "
            f"{(cx0, cy0, cx1, cy1)}",
            stacklevel=3,
        )
    return cx0, cy0, cx1, cy1


def check_finite_array(name: str, values: Any) -> np.ndarray:
    """``values`` as a 1-D float array without NaN or infinity; raises otherwise."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a 1-D sequence of numbers, got {values!r}") from None
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains {int((~np.isfinite(arr)).sum())} NaN or infinite values")
    return arr
