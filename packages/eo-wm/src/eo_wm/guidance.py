"""Choosing the anomaly-path guidance weight of a trained model on its validation windows.

Sampling may amplify the anomaly pathway, ``v = v_no_anomaly + w (v_full - v_no_anomaly)``
(the spec's optional guidance, trained by condition dropout). How much ``w`` helps depends on
what the trained model learned: a weight that helps one model can overshoot the truth's
response for another. :func:`select_guidance` picks ``w`` per trained model from a small grid,
on windows the model was not trained on and that are not test windows, by a stated forecast
error: the lowest validation NDVI MAE of the ensemble mean (``"ndvi_mae"``, the spec's
standard deterministic metric) or the lowest mean CRPS of the frame-NDVI trajectories
(``"ndvi_crps"``, its probabilistic one). ``w`` stays a parameter of
:meth:`~eo_wm.model.EOWorldModel.sample`; this helper only recommends one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from eo_wm import metrics
from eo_wm._eo_wm import EOWorldModel
from eo_wm.train import check_dataset, sample_ensemble
from methodkit import progress as progress_bar

GUIDANCE_GRID = (0.0, 1.0, 2.0, 3.0)
CRITERIA = ("ndvi_mae", "ndvi_crps")


@dataclass(frozen=True)
class GuidanceChoice:
    """The chosen weight, the validation score of every weight tried, and the criterion."""

    guidance: float
    scores: dict[float, float] = field(default_factory=dict)
    criterion: str = "ndvi_mae"


def _check_grid(grid: Sequence[float]) -> tuple[float, ...]:
    try:
        values = tuple(float(w) for w in grid)
    except (TypeError, ValueError) as err:
        raise TypeError(f"grid must be a sequence of numbers, got {grid!r}") from err
    if not values:
        raise ValueError("grid must hold at least one guidance weight, got an empty sequence")
    bad = [w for w in values if not math.isfinite(w) or w < 0]
    if bad:
        raise ValueError(f"grid weights must be finite and >= 0, got {bad}")
    return values


def validation_score(
    members: Tensor | np.ndarray,
    validation: Mapping[str, Tensor],
    criterion: str = "ndvi_mae",
    bands: Sequence[str] = ("B", "G", "R", "NIR"),
) -> float:
    """Forecast error of an ensemble ``(M, N, T_f, C, H, W)`` on the validation targets.

    ``"ndvi_mae"``: NDVI MAE of the ensemble mean over valid vegetated pixels;
    ``"ndvi_crps"``: mean CRPS of the frame-NDVI trajectories of the members.
    """
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    m = members.detach().cpu().numpy() if isinstance(members, Tensor) else np.asarray(members)
    tgt = validation["target"].detach().cpu().numpy()
    mask = validation["target_mask"].detach().cpu().numpy()
    if criterion == "ndvi_mae":
        return metrics.ndvi_mae(m.mean(0), tgt, mask, bands)
    gt_nd = metrics.ndvi(tgt, bands)
    gt = metrics.ndvi_trajectory(gt_nd, gt_nd, mask)
    traj = np.stack([metrics.ndvi_trajectory(metrics.ndvi(x, bands), gt_nd, mask) for x in m])
    return float(np.nanmean(metrics.crps_ensemble(traj, gt)))


def select_guidance(
    model: EOWorldModel,
    validation: Mapping[str, Tensor],
    grid: Sequence[float] = GUIDANCE_GRID,
    criterion: str = "ndvi_mae",
    n_members: int = 8,
    n_steps: int = 30,
    seed: int = 0,
    bands: Sequence[str] = ("B", "G", "R", "NIR"),
    progress: bool | None = None,
    **sample_kwargs: Any,
) -> GuidanceChoice:
    """The guidance weight in ``grid`` with the lowest validation forecast error.

    ``validation``: windows the model was not trained on (never the test windows), in the
    layout of :func:`~eo_wm.train.train_model`'s dataset. Every weight is sampled with the
    same noise (generator seeded with ``seed``), so the scores differ by ``w`` only. Ties and
    equal scores go to the smaller weight (fewer network calls); NaN scores never win.
    ``sample_kwargs`` go to :func:`~eo_wm.train.sample_ensemble` (``method``, ``batch_size``).
    ``progress``: a bar over the weights (None: on a terminal only).

    Raises:
        ValueError: On an empty grid, a negative or non-finite weight, an unknown
            ``criterion``, a model without an anomaly pathway (``conditioning`` other than
            ``"decomposed"``), a dataset ``train_model`` would refuse, or when every score is
            NaN (no valid vegetated pixel).
        TypeError: When ``grid`` is not a sequence of numbers.
    """
    values = _check_grid(grid)
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
    if not model.has_cross:
        raise ValueError(
            "guidance acts on the anomaly pathway; a model with conditioning="
            f"{model.config.conditioning!r} has none (use conditioning='decomposed')"
        )
    check_dataset(model, validation)
    scores: dict[float, float] = {}
    for w in progress_bar(values, enabled=progress, desc="guidance", unit="w"):
        members = sample_ensemble(
            model,
            validation,
            n_members,
            n_steps,
            generator=torch.Generator().manual_seed(seed),
            guidance=w,
            **sample_kwargs,
        )
        scores[w] = validation_score(members, validation, criterion, bands)
    finite = {w: s for w, s in scores.items() if math.isfinite(s)}
    if not finite:
        raise ValueError(
            f"every validation {criterion} is NaN: the validation targets have no valid "
            "vegetated pixel (NDVI >= 0.3 under a clear mask)"
        )
    best = min(sorted(finite), key=lambda w: finite[w])
    return GuidanceChoice(best, scores, criterion)


__all__ = ["CRITERIA", "GUIDANCE_GRID", "GuidanceChoice", "select_guidance", "validation_score"]
