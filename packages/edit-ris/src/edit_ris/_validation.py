"""Boundary checks shared by the segmenter, the baselines and the metrics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch


def to_image_tensor(images: Any, size_multiple: int = 1) -> tuple[torch.Tensor, bool]:
    """Validate RGB images and return ``(float tensor (B, 3, H, W) in [0, 1], was_numpy)``.

    Accepts a float numpy array or tensor (B, 3, H, W) in [0, 1], or a list of PIL images.

    Raises:
        TypeError: For a non-floating dtype (uint8 must be divided by 255) or another type.
        ValueError: For a wrong shape, non-RGB channels, an empty batch or image, NaN or
            infinite values, values outside [0, 1] or a size that is not a multiple of
            ``size_multiple``.
    """
    was_numpy = not isinstance(images, torch.Tensor)
    if isinstance(images, (list, tuple)) and not images:
        raise ValueError("images is an empty list: pass at least one image")
    if isinstance(images, (list, tuple)) and hasattr(images[0], "convert"):
        images = np.stack(
            [np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0 for im in images]
        )
        images = images.transpose(0, 3, 1, 2)
    if isinstance(images, np.ndarray):
        if not np.issubdtype(images.dtype, np.floating):
            raise TypeError(
                f"images must be floating point in [0, 1], got dtype {images.dtype}"
                " (divide uint8 images by 255)"
            )
        images = torch.from_numpy(np.ascontiguousarray(images))
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"images must be an array, a tensor or PIL images, got {type(images)}")
    if not images.is_floating_point():
        raise TypeError(
            f"images must be floating point in [0, 1], got dtype {images.dtype}"
            " (divide uint8 images by 255)"
        )
    if images.ndim != 4:
        raise ValueError(f"images must have shape (B, 3, H, W), got {tuple(images.shape)}")
    if images.shape[1] != 3:
        raise ValueError(
            f"images must be RGB with 3 channels in dim 1 (B, 3, H, W), got {images.shape[1]}"
        )
    if images.shape[0] == 0:
        raise ValueError(f"images is an empty batch: shape {tuple(images.shape)}")
    if images.shape[2] == 0 or images.shape[3] == 0:
        raise ValueError(f"images have zero height or width: shape {tuple(images.shape)}")
    finite = torch.isfinite(images)
    if not bool(finite.all()):  # before the range check: NaN compares False with everything
        n_bad = int((~finite).sum())
        raise ValueError(
            f"images contain {n_bad} NaN or infinite value(s); images must be finite, in [0, 1]"
        )
    if float(images.min()) < -1e-6 or float(images.max()) > 1 + 1e-6:
        raise ValueError(
            f"images must lie in [0, 1], got range [{float(images.min()):.3g}, "
            f"{float(images.max()):.3g}]"
        )
    h, w = images.shape[-2:]
    if h % size_multiple or w % size_multiple:
        nh = max(size_multiple, round(h / size_multiple) * size_multiple)
        nw = max(size_multiple, round(w / size_multiple) * size_multiple)
        raise ValueError(
            f"image size {h}x{w} is not a multiple of the backbone's downsampling factor "
            f"{size_multiple}; resize to {nh}x{nw} first (torch.nn.functional.interpolate)"
        )
    return images, was_numpy


def check_expressions(expressions: Sequence[str], n_images: int) -> list[str]:
    """A list of non-empty strings, one per image.

    Raises:
        TypeError: If not a sequence of str.
        ValueError: On a length mismatch or an empty/whitespace expression.
    """
    if isinstance(expressions, str):
        raise TypeError("expressions must be a sequence of str, not a single str")
    exprs = list(expressions)
    if any(not isinstance(e, str) for e in exprs):
        raise TypeError("every expression must be a str")
    if len(exprs) != n_images:
        raise ValueError(
            f"len(images) != len(expressions): {n_images} images but {len(exprs)} expressions"
        )
    for i, e in enumerate(exprs):
        if not e.strip():
            raise ValueError(f"expression {i} is empty or whitespace only: {e!r}")
    return exprs


def check_masks(pred: Any, gt: Any) -> tuple[np.ndarray, np.ndarray]:
    """Two binary masks of one shape as bool arrays (B, H, W) (a single mask gets B = 1).

    Raises:
        ValueError: For different shapes, a shape that is not (H, W) or (B, H, W), an empty
            batch or non-binary values (NaN included).
    """
    p, g = (np.asarray(x.cpu() if isinstance(x, torch.Tensor) else x) for x in (pred, gt))
    if p.shape != g.shape:
        raise ValueError(f"pred and gt must have the same shape, got {p.shape} and {g.shape}")
    if p.ndim not in (2, 3):
        raise ValueError(f"pred and gt must have shape (H, W) or (B, H, W), got {p.shape}")
    if p.size == 0:
        raise ValueError(f"pred and gt are empty (shape {p.shape}): no mask to score")
    for name, m in (("pred", p), ("gt", g)):
        if m.dtype != bool and not np.isin(m, (0, 1)).all():
            raise ValueError(f"{name} must be a binary mask (bool or 0/1), got other values")
    p, g = p.astype(bool), g.astype(bool)
    if p.ndim == 2:
        p, g = p[None], g[None]
    return p, g
