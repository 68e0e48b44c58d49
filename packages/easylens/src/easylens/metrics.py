"""AUROC / AUPRC (scikit-learn) and patch-level tag precision and recall."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.metrics import average_precision_score, roc_auc_score


def auroc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve."""
    return float(roc_auc_score(np.asarray(labels), np.asarray(scores)))


def auprc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Average precision."""
    return float(average_precision_score(np.asarray(labels), np.asarray(scores)))


def tag_precision_recall(selected: torch.Tensor, patch_mask: torch.Tensor) -> tuple[float, float]:
    """Share of tagged patches that are lesion patches, and of lesion patches tagged.

    NaN where the denominator is empty.
    """
    sel = torch.as_tensor(selected).bool()
    gt = torch.as_tensor(patch_mask).bool()
    if sel.shape != gt.shape:
        raise ValueError(
            f"selected {tuple(sel.shape)} and patch_mask {tuple(gt.shape)} differ in shape"
        )
    tp = float((sel & gt).sum())
    n_sel, n_gt = float(sel.sum()), float(gt.sum())
    return (tp / n_sel if n_sel else float("nan"), tp / n_gt if n_gt else float("nan"))
