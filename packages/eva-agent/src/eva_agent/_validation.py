"""Checks at the public boundary (named errors with the value and what is allowed)."""

from __future__ import annotations

import math
import warnings
from typing import Any

from PIL import Image


def as_rgb(image: Any, name: str = "image") -> Image.Image:
    """``image`` as a PIL RGB image (PIL image or HxW[xC] uint8 array), keeping ``info``.

    Raises:
        TypeError: If it is neither a PIL image nor an array convertible to RGB.
        ValueError: If it has zero width or height.
    """
    if isinstance(image, Image.Image):
        img = image
    else:
        try:
            import numpy as np

            arr = np.asarray(image)
            if arr.dtype == object or arr.ndim not in (2, 3):
                raise TypeError
            if 0 in arr.shape[:2]:
                raise ValueError(f"{name} has zero size: shape {arr.shape}")
            img = Image.fromarray(arr.astype("uint8"))
        except (TypeError, ValueError) as e:
            if isinstance(e, ValueError) and "zero size" in str(e):
                raise
            raise TypeError(
                f"{name} must be a PIL image or an HxW[x3] uint8 array, got {type(image).__name__}"
            ) from None
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


def check_question(question: Any) -> str:
    """The question stripped; raises on a non-string or an empty one."""
    if not isinstance(question, str):
        raise TypeError(f"question must be a str, got {type(question).__name__}")
    q = question.strip()
    if not q:
        raise ValueError("question is empty")
    return q


def check_unit(name: str, value: Any) -> float:
    """``value`` as a float in [0, 1]; raises otherwise."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number in [0, 1], got {value!r}") from None
    if not (0.0 <= v <= 1.0) or math.isnan(v):
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return v


def check_positive_int(name: str, value: Any, low: int = 1) -> int:
    """``value`` as an int >= ``low``; raises otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int >= {low}, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return value


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
