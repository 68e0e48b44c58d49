"""Weather-response diagnostics (Extreme Summer, Seasonal Matched-Pair) and standard metrics.

As in the public evaluation code: ``NDVI = (NIR - R) / (NIR + R + 1e-8)``, vegetation mask
``GT NDVI >= 0.3``, frame NDVI = spatial mean over valid and vegetated pixels. Arrays are
numpy (torch tensors are converted); layout ``(..., T, C, H, W)``, masks ``(..., T, 1, H, W)``.
A window with no valid vegetated pixel gives NaN with a ``RuntimeWarning``, never an exception.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from eo_wm._validation import band_indices

DIFF_THRESHOLD = 0.02


def _np(x: object) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def ndvi(frames: ArrayLike, bands: Sequence[str] = ("B", "G", "R", "NIR")) -> np.ndarray:
    """``(NIR - R) / (NIR + R + 1e-8)`` per pixel: ``(..., C, H, W) -> (..., H, W)``."""
    x = _np(frames)
    r, n = band_indices(bands)
    if x.ndim < 3 or x.shape[-3] != len(bands):
        raise ValueError(f"frames must be (..., {len(bands)}, H, W), got {x.shape}")
    return (x[..., n, :, :] - x[..., r, :, :]) / (x[..., n, :, :] + x[..., r, :, :] + 1e-8)


def vegetation_mask(gt_ndvi: ArrayLike, threshold: float = 0.3) -> np.ndarray:
    """``GT NDVI >= threshold`` (NaN counts as not vegetated)."""
    g = _np(gt_ndvi)
    return np.nan_to_num(g, nan=-np.inf) >= threshold


def ndvi_trajectory(
    pred_ndvi: ArrayLike, gt_ndvi: ArrayLike, mask: ArrayLike | None = None
) -> np.ndarray:
    """Frame NDVI ``(..., T)``: mean of ``pred_ndvi (..., T, H, W)`` over valid vegetated pixels.

    Vegetation comes from ``gt_ndvi``; ``mask (..., T, 1, H, W)`` or ``(..., T, H, W)`` with
    1 = valid. Frames with no such pixel are NaN.
    """
    p, g = _np(pred_ndvi), _np(gt_ndvi)
    if p.shape != g.shape:
        raise ValueError(f"pred_ndvi {p.shape} and gt_ndvi {g.shape} must match")
    keep = vegetation_mask(g)
    if mask is not None:
        m = _np(mask)
        m = m[..., 0, :, :] if m.ndim == p.ndim + 1 else m
        if m.shape != p.shape:
            raise ValueError(f"mask shape {m.shape} does not match the NDVI maps {p.shape}")
        keep = keep & (m > 0.5)
    n = keep.sum(axis=(-1, -2))
    s = np.where(keep, p, 0.0).sum(axis=(-1, -2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / np.maximum(n, 1), np.nan)


def baseline_ndvi(context_traj: ArrayLike, n_last: int = 3) -> np.ndarray:
    """Reference level: mean frame NDVI of the last ``n_last`` valid context frames (..., T_c)."""
    c = _np(context_traj)
    out = np.full(c.shape[:-1], np.nan)
    for ix in np.ndindex(c.shape[:-1]):
        v = c[ix][np.isfinite(c[ix])]
        if v.size:
            out[ix] = v[-n_last:].mean()
    return out


def _warn_nan(x: np.ndarray, what: str) -> None:
    if np.any(~np.isfinite(x)):
        warnings.warn(
            f"{what}: some windows have no valid vegetated pixel (NaN)",
            RuntimeWarning,
            stacklevel=3,
        )


def _drop(baseline: np.ndarray, traj: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        trough = np.where(
            np.all(np.isnan(traj), -1),
            np.nan,
            np.nanmin(np.where(np.isnan(traj), np.inf, traj), -1),
        )
    return baseline - trough


def drop_amplitude_error(
    pred_traj: ArrayLike, gt_traj: ArrayLike, baseline: ArrayLike
) -> np.ndarray:
    """Per-window DAE ``|(b - min_t pred) - (b - min_t gt)|``; trajectories ``(N, T_f)``.

    Pred frames are read where the GT frame is defined (the same frames enter both minima).
    """
    p, g, b = _np(pred_traj), _np(gt_traj), _np(baseline)
    if p.shape != g.shape:
        raise ValueError(f"pred_traj {p.shape} and gt_traj {g.shape} must match")
    p = np.where(np.isnan(g), np.nan, p)
    out = np.abs(_drop(b, p) - _drop(b, g))
    _warn_nan(out, "drop_amplitude_error")
    return out


def gt_drop(gt_traj: ArrayLike, baseline: ArrayLike) -> np.ndarray:
    """GT drop ``baseline - min_t GT frame NDVI`` per window."""
    return _drop(_np(baseline), _np(gt_traj))


def trough_ndvi_mae(pred_traj: ArrayLike, gt_traj: ArrayLike) -> np.ndarray:
    """Per-window ``|pred - gt|`` of frame NDVI at the GT trough frame."""
    p, g = _np(pred_traj), _np(gt_traj)
    out = np.full(g.shape[:-1], np.nan)
    for ix in np.ndindex(g.shape[:-1]):
        if np.any(np.isfinite(g[ix])):
            t = int(np.nanargmin(g[ix]))
            out[ix] = abs(p[ix][t] - g[ix][t])
    _warn_nan(out, "trough_ndvi_mae")
    return out


def severity_bins(gt_drops: ArrayLike) -> np.ndarray:
    """Tercile of each GT drop (0 low, 1 mid, 2 high) at the 33.3 / 66.7 % percentiles.

    A NaN drop gets bin -1 (no bin), never "high". An empty selection gives an empty array;
    one with no finite drop gives all -1 with a ``RuntimeWarning``, so that the per-bin means
    downstream read NaN ("not measured") instead of failing.

    Example:
        >>> severity_bins([0.1, 0.2, 0.3, float("nan")]).tolist()
        [0, 1, 2, -1]
    """
    d = _np(gt_drops).astype(np.float64, copy=False)
    finite = np.isfinite(d)
    bins = np.full(d.shape, -1, dtype=np.int64)
    if d.size and not finite.any():
        warnings.warn(
            "severity_bins: no finite drop; every bin is -1", RuntimeWarning, stacklevel=2
        )
    if not finite.any():
        return bins
    lo, hi = np.percentile(d[finite], [100 / 3, 200 / 3])
    bins[finite] = np.where(d[finite] <= lo, 0, np.where(d[finite] <= hi, 1, 2))
    return bins


def _pair_diffs(
    pred_a: ArrayLike, pred_b: ArrayLike, gt_a: ArrayLike, gt_b: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    arrs = [_np(x) for x in (pred_a, pred_b, gt_a, gt_b)]
    if len({a.shape for a in arrs}) != 1:
        raise ValueError(
            "matched-pair inputs must have one shape (pairs, T_f); got "
            + ", ".join(str(a.shape) for a in arrs)
        )
    pa, pb, ga, gb = arrs
    return pa - pb, ga - gb


def divergence_reproduction_ratio(
    pred_a: ArrayLike,
    pred_b: ArrayLike,
    gt_a: ArrayLike,
    gt_b: ArrayLike,
    threshold: float = DIFF_THRESHOLD,
) -> float:
    """DRR = mean |pred_a - pred_b| / mean |gt_a - gt_b| over steps with |gt diff| > threshold."""
    dp, dg = _pair_diffs(pred_a, pred_b, gt_a, gt_b)
    keep = np.isfinite(dp) & np.isfinite(dg) & (np.abs(dg) > threshold)
    if not keep.any():
        warnings.warn(
            "no step exceeds the divergence threshold: DRR is NaN", RuntimeWarning, stacklevel=2
        )
        return float("nan")
    return float(np.abs(dp[keep]).mean() / np.abs(dg[keep]).mean())


def directional_hit_rate(
    pred_a: ArrayLike,
    pred_b: ArrayLike,
    gt_a: ArrayLike,
    gt_b: ArrayLike,
    threshold: float = DIFF_THRESHOLD,
) -> float:
    """DHR: share of steps, pooled over pairs, with |gt diff| > threshold where signs agree."""
    dp, dg = _pair_diffs(pred_a, pred_b, gt_a, gt_b)
    keep = np.isfinite(dp) & np.isfinite(dg) & (np.abs(dg) > threshold)
    if not keep.any():
        warnings.warn(
            "no step exceeds the divergence threshold: DHR is NaN", RuntimeWarning, stacklevel=2
        )
        return float("nan")
    return float(np.mean(np.sign(dp[keep]) == np.sign(dg[keep])))


def paired_divergence_correlation(
    pred_a: ArrayLike, pred_b: ArrayLike, gt_a: ArrayLike, gt_b: ArrayLike
) -> float:
    """PDC: Spearman correlation over pairs of total |pred divergence| vs total |gt divergence|."""
    dp, dg = _pair_diffs(pred_a, pred_b, gt_a, gt_b)
    ok = np.isfinite(dp) & np.isfinite(dg)
    tp = np.where(ok, np.abs(dp), 0.0).sum(-1)
    tg = np.where(ok, np.abs(dg), 0.0).sum(-1)
    if tp.size < 3 or np.ptp(tp) == 0 or np.ptp(tg) == 0:
        warnings.warn(
            "PDC needs >= 3 pairs with varying divergence: NaN", RuntimeWarning, stacklevel=2
        )
        return float("nan")
    from scipy.stats import spearmanr  # lazy: scipy.stats costs seconds at import

    return float(spearmanr(tp, tg).statistic)


def pixel_mae(pred: ArrayLike, target: ArrayLike, mask: ArrayLike) -> float:
    """Mean |pred - target| over valid pixels and all bands; mask ``(..., T, 1, H, W)``."""
    p, t, m = _np(pred), _np(target), _np(mask)
    if p.shape != t.shape:
        raise ValueError(f"pred {p.shape} and target {t.shape} must match")
    w = np.broadcast_to(m, p.shape)
    if w.sum() == 0:
        warnings.warn("pixel_mae: no valid pixel (NaN)", RuntimeWarning, stacklevel=2)
        return float("nan")
    return float((np.abs(p - t) * w).sum() / w.sum())


def ndvi_mae(
    pred: ArrayLike,
    target: ArrayLike,
    mask: ArrayLike,
    bands: Sequence[str] = ("B", "G", "R", "NIR"),
) -> float:
    """Mean |NDVI(pred) - NDVI(target)| over valid vegetated pixels."""
    pn, tn = ndvi(pred, bands), ndvi(target, bands)
    m = _np(mask)[..., 0, :, :] > 0.5
    keep = m & vegetation_mask(tn)
    if not keep.any():
        warnings.warn("ndvi_mae: no valid vegetated pixel (NaN)", RuntimeWarning, stacklevel=2)
        return float("nan")
    return float(np.abs(pn - tn)[keep].mean())


def crps_ensemble(members: ArrayLike, obs: ArrayLike) -> np.ndarray:
    """CRPS of an ensemble ``(M, ...)`` against ``obs (...)``: E|X - y| - 0.5 E|X - X'|.

    One member gives the absolute error. NaN observations give NaN.
    """
    x, y = _np(members), _np(obs)
    if x.shape[1:] != y.shape:
        raise ValueError(f"members {x.shape} must be (M,) + obs shape {y.shape}")
    skill = np.abs(x - y).mean(0)
    spread = np.abs(x[:, None] - x[None, :]).mean((0, 1))
    return skill - 0.5 * spread


def spread_skill(members: ArrayLike, obs: ArrayLike) -> float:
    """Ratio of mean ensemble spread (member std, ddof=1) to the RMSE of the ensemble mean.

    Computed as ``sqrt(mean var) / sqrt(mean (mean - y)^2)`` over finite observations, with
    the ``(M + 1) / M`` finite-ensemble correction on the spread; 1 is calibrated.
    """
    x, y = _np(members), _np(obs)
    if x.shape[1:] != y.shape or x.shape[0] < 2:
        raise ValueError(f"members {x.shape} must be (M >= 2,) + obs shape {y.shape}")
    ok = np.isfinite(y) & np.all(np.isfinite(x), 0)
    if not ok.any():
        warnings.warn("spread_skill: no finite observation (NaN)", RuntimeWarning, stacklevel=2)
        return float("nan")
    m = x.shape[0]
    var = x.var(0, ddof=1)[ok].mean() * (m + 1) / m
    mse = ((x.mean(0) - y) ** 2)[ok].mean()
    return float(np.sqrt(var) / np.sqrt(mse)) if mse > 0 else float("nan")
