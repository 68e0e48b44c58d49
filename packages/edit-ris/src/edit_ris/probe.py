"""Separability probe: how well decoder features split referent from background, per timestep."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.nn import functional as nnf

from edit_ris._validation import check_expressions, to_image_tensor
from edit_ris.backbones.base import CaptureSpec
from edit_ris.tokens import strip_article


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney, ties counted half); NaN if one class is empty."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    n1, n0 = int(y.sum()), int((~y).sum())
    if n1 == 0 or n0 == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    i = 0
    while i < len(s):  # average ranks over ties
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def fisher_ratio(scores: np.ndarray, labels: np.ndarray) -> float:
    """``(mean_fg - mean_bg)^2 / (var_fg + var_bg)`` of a 1-D score."""
    s, y = np.asarray(scores, dtype=np.float64), np.asarray(labels, dtype=bool)
    if y.sum() < 2 or (~y).sum() < 2:
        return float("nan")
    return float((s[y].mean() - s[~y].mean()) ** 2 / (s[y].var() + s[~y].var() + 1e-12))


def separability_curve(
    backbone: Any,
    images: Any,
    exprs: Sequence[str],
    masks: Any,
    timesteps: Sequence[int],
    layers: Sequence[str] | None = None,
    template: str = "make the {ref} red",
    seed: int = 0,
) -> dict[str, list]:
    """Foreground/background separability of decoder features for each (timestep, layer).

    For each image the score of a pixel is the cosine of its (unit) feature to the mean unit
    feature of the ground-truth referent at that layer's resolution; reported are the mean
    AUROC and Fisher ratio of that score over images (needs GT masks: an analysis tool).

    Returns:
        Columns ``timestep``, ``layer``, ``auroc``, ``fisher`` (one row per pair).

    Raises:
        ValueError: For masks of the wrong shape or not binary (NaN included), no timesteps,
            a timestep outside [0, T), absent layers, or the image/expression errors of
            :meth:`~edit_ris.EditRIS.predict`.
    """
    x, _ = to_image_tensor(images, getattr(backbone, "size_multiple", 1))
    exprs = check_expressions(exprs, x.shape[0])
    m_np = np.asarray(masks.cpu() if isinstance(masks, torch.Tensor) else masks)
    if m_np.dtype != bool and not np.isin(m_np, (0, 1)).all():
        raise ValueError("masks must be binary (bool or 0/1), got other values (NaN included)")
    gt = torch.as_tensor(m_np).float()
    if gt.shape != (x.shape[0], *x.shape[-2:]):
        raise ValueError(
            f"masks must have shape {(x.shape[0], *x.shape[-2:])}, got {tuple(gt.shape)}"
        )
    timesteps = list(timesteps)
    if not timesteps:
        raise ValueError("timesteps is empty: give at least one timestep")
    big_t = int(getattr(backbone, "num_train_timesteps", 0)) or None
    for t in timesteps:
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise TypeError(f"timesteps must be ints, got {t!r}")
        if t < 0 or (big_t is not None and t >= big_t):
            raise ValueError(f"timestep {t} is not in the schedule [0, {big_t})")
    names = [li.name for li in backbone.layer_info() if li.kind == "features"]
    layers = list(names if layers is None else layers)
    absent = [n for n in layers if n not in names]
    if absent:
        raise ValueError(f"layers {absent} are absent from layer_info(); available: {names}")
    instr = [template.replace("{ref}", strip_article(e)) for e in exprs]
    spec = CaptureSpec(cross_attn=(), self_attn=(), features=tuple(layers))
    out: dict[str, list] = {"timestep": [], "layer": [], "auroc": [], "fisher": []}
    for t in timesteps:
        with torch.no_grad():
            cap = backbone.forward_capture(x, instr, int(t), seed, capture=spec)
        for name in layers:
            f = nnf.normalize(cap.features[name].float(), dim=1)
            side = f.shape[-1]
            m = nnf.interpolate(gt[:, None], size=f.shape[-2:], mode="area")[:, 0] > 0.5
            au, fi = [], []
            for i in range(x.shape[0]):
                fi_ = f[i].flatten(1).T
                lab = m[i].flatten().numpy()
                if lab.sum() == 0 or lab.all():
                    continue
                centroid = nnf.normalize(fi_[torch.from_numpy(lab)].mean(0), dim=0)
                score = (fi_ @ centroid).numpy()
                au.append(auroc(score, lab))
                fi.append(fisher_ratio(score, lab))
            out["timestep"].append(int(t))
            out["layer"].append(f"{name}@{side}")
            out["auroc"].append(float(np.nanmean(au)) if au else float("nan"))
            out["fisher"].append(float(np.nanmean(fi)) if fi else float("nan"))
    return out
