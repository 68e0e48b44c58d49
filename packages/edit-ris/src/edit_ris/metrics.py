"""RIS metrics: IoU, mIoU (mean per expression), oIoU (cumulative), Pr@X."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from edit_ris._validation import check_masks
from methodkit.checks import check_real


def iou(pred: Any, gt: Any) -> np.ndarray:
    """Per-mask IoU of binary masks (B, H, W) or (H, W).

    Convention: an empty prediction of an empty ground truth has IoU 1; an empty prediction
    of a non-empty ground truth has IoU 0.

    Raises:
        ValueError: For different shapes, non-binary masks, a shape other than (H, W) or
            (B, H, W), or an empty batch.
    """
    p, g = check_masks(pred, gt)
    inter = (p & g).reshape(len(p), -1).sum(1)
    union = (p | g).reshape(len(p), -1).sum(1)
    return np.where(union == 0, 1.0, inter / np.maximum(union, 1))


def miou(pred: Any, gt: Any) -> float:
    """Mean of the per-expression IoUs."""
    return float(iou(pred, gt).mean())


def oiou(pred: Any, gt: Any) -> float:
    """Overall IoU: total intersection over total union (large objects weigh more)."""
    p, g = check_masks(pred, gt)
    union = int((p | g).sum())
    return 1.0 if union == 0 else float((p & g).sum() / union)


def precision_at(
    pred: Any, gt: Any, thresholds: Sequence[float] = (0.5, 0.7, 0.9)
) -> dict[float, float]:
    """Fraction of expressions whose IoU exceeds each threshold (``Pr@X``, strict ``>``).

    Raises:
        ValueError: For a threshold outside [0, 1] (or NaN), or the mask errors of :func:`iou`.
    """
    thresholds = [check_real("thresholds", t, 0.0, 1.0) for t in thresholds]
    scores = iou(pred, gt)
    return {float(t): float((scores > t).mean()) for t in thresholds}
