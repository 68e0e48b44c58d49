"""Helpers of the eo-wm benchmark: world, models, evaluation, claims (not shipped in the wheel)."""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
import torch

from eo_wm import metrics as M  # noqa: N812
from eo_wm.baselines import (
    ConvLSTMForecaster,
    persistence_forecast,
    predict_convlstm,
    train_convlstm,
)
from eo_wm.guidance import select_guidance
from eo_wm.model import EOWMConfig, EOWorldModel
from eo_wm.sets import (
    frame_ndvi,
    make_counterfactual_pairs,
    make_dataset,
    make_dose_response,
    make_extreme_summer,
    make_seasonal_pairs,
    stack_windows,
    summer_windows,
    to_tensors,
)
from eo_wm.simulator import LandSurfaceSimulator
from eo_wm.train import sample_ensemble, train_model
from eo_wm.weather import WeatherDecomposer

DOSE_SCALES = (0.0, 1.0, 2.0)
SETS = ("eval_t", "cf", "dose")
DIFFUSION = {"eo_wm": {}, "undiff_diffusion": {"conditioning": "undifferentiated"}}
ABLATIONS = {"eo_wm_no_stress": {"use_stress": False}, "eo_wm_merged": {"conditioning": "merged"}}


def _select(w: dict[str, np.ndarray], idx: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[idx] for k, v in w.items()}


def build_world(cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    """Simulate train and test scenes, fit the decomposer, cut every evaluation set."""
    t0 = time.perf_counter()
    train_sim = LandSurfaceSimulator(cfg["train_locations"], cfg["grid"], seed=10 * seed + 1)
    test_sim = LandSurfaceSimulator(cfg["test_locations"], cfg["grid"], seed=10 * seed + 2)
    train_cube, test_cube = train_sim.simulate(cfg["years"]), test_sim.simulate(cfg["years"])
    dec = WeatherDecomposer().fit(
        train_cube["weather"].reshape(-1, 3),
        np.tile(train_cube["doy"], cfg["train_locations"]),
        variables=["temp", "precip", "rad"],
    )
    train = to_tensors(make_dataset(train_cube, cfg["train_windows"], seed), dec)
    test = summer_windows(test_cube)
    rng = np.random.default_rng(seed)
    ext = make_extreme_summer(test)
    ext = np.sort(rng.choice(ext, min(len(ext), cfg["n_extreme"]), replace=False))
    pairs = make_seasonal_pairs(test, n_pairs=cfg["n_pairs"], seed=seed)
    used = np.unique(np.concatenate([ext, pairs.ravel()]))
    pos = {int(i): k for k, i in enumerate(used)}
    cf_a, cf_b = make_counterfactual_pairs(test_sim, test_cube, cfg["n_cf"], seed=seed)
    evalw = _select(test, used)
    evalw["clim_ndvi"] = _climatology(test, used)
    dose = make_dose_response(test_sim, test_cube, dec, cfg["n_dose"], seed, DOSE_SCALES)
    return {
        "val": validation_windows(cfg, seed, dec),
        "decomposer": dec,
        "train": train,
        "eval": evalw,
        "eval_t": to_tensors(evalw, dec),
        "extreme": np.array([pos[int(i)] for i in ext], dtype=int),
        "pairs": np.vectorize(pos.get)(pairs) if len(pairs) else pairs,
        "cf": to_tensors(stack_windows([*_rows(cf_a), *_rows(cf_b)]), dec),
        "n_cf": cfg["n_cf"],
        "cf_np": (cf_a, cf_b),
        "dose_np": dose,
        "dose": to_tensors({k: np.concatenate([w[k] for w in dose]) for k in dose[0]}, dec),
        "sim_s": time.perf_counter() - t0,
    }


def validation_windows(cfg: dict[str, Any], seed: int, dec: WeatherDecomposer) -> dict:
    """Windows for choosing the guidance weight: held-out scenes, neither training nor test.

    ``val_locations`` scenes of the same world (simulator seed ``10 seed + 3``; training uses
    ``10 seed + 1``, test ``10 seed + 2``), their summer windows: up to half Extreme Summer
    windows (as in the test's evaluation set), the rest drawn from the other summer windows.
    """
    sim = LandSurfaceSimulator(cfg["val_locations"], cfg["grid"], seed=10 * seed + 3)
    val = summer_windows(sim.simulate(cfg["years"]))
    rng = np.random.default_rng(10 * seed + 3)
    ext = make_extreme_summer(val)
    ext = rng.choice(ext, min(len(ext), cfg["n_val"] // 2), replace=False)
    rest = np.setdiff1d(np.arange(len(val["context"])), ext)
    rest = rng.choice(rest, min(len(rest), cfg["n_val"] - len(ext)), replace=False)
    return to_tensors(_select(val, np.sort(np.concatenate([ext, rest]))), dec)


def _rows(w: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    n = len(w["context"])
    return [{k: v[i] for k, v in w.items()} for i in range(n)]


def _climatology(test: dict[str, np.ndarray], used: np.ndarray) -> np.ndarray:
    """Per-pixel NDVI climatology of each window's target from the scene's other years."""
    nd = M.ndvi(test["target"])
    nd = np.where(test["target_mask"][:, :, 0] > 0.5, nd, np.nan)
    out = []
    for i in used:
        same = (test["location"] == test["location"][i]) & (
            test["start"] % 73 == test["start"][i] % 73
        )
        same[i] = False
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out.append(np.nanmean(nd[same], 0))
    return np.stack(out)


def model_config(cfg: dict[str, Any], **kw: Any) -> EOWMConfig:
    return EOWMConfig(
        4,
        3,
        3,
        8,
        12,
        cfg["grid"],
        patch_size=cfg["patch"],
        hidden=cfg["hidden"],
        depth=cfg["depth"],
        heads=cfg["heads"],
        n_stress=4,
        **kw,
    )


def _sample_all(
    cfg: dict[str, Any],
    world: dict[str, Any],
    seed: int,
    model: EOWorldModel,
    guidance: float,
    train_s: float,
) -> dict[str, Any]:
    """Ensembles of every evaluation set with anomaly-path guidance ``guidance``, and costs."""
    t = time.perf_counter()
    preds = {
        s: sample_ensemble(
            model,
            world[s],
            cfg["members"],
            cfg["euler_steps"],
            generator=torch.Generator().manual_seed(seed + 7),
            guidance=guidance,
        ).numpy()
        for s in SETS
    }
    n_win = sum(len(world[s]["context"]) for s in SETS)
    calls = cfg["members"] * cfg["euler_steps"] * (1 if guidance in (0.0, 1.0) else 2)
    return {
        "members": preds,
        "train_s": train_s,
        "sample_s_per_window": (time.perf_counter() - t) / n_win,
        "calls_per_window": calls,
        "params": sum(p.numel() for p in model.parameters()),
    }


def _choose_guidance(
    cfg: dict[str, Any], world: dict[str, Any], seed: int, model: EOWorldModel
) -> tuple[float, dict[str, float]]:
    """``select_guidance`` on the world's validation windows (never the test windows)."""
    choice = select_guidance(
        model,
        world["val"],
        cfg["guidance_grid"],
        cfg["guidance_criterion"],
        cfg["members"],
        cfg["euler_steps"],
        seed=seed + 11,
    )
    scores = {f"val_{choice.criterion}_w{w:g}": s for w, s in choice.scores.items()}
    return choice.guidance, {"guidance_w": choice.guidance, **scores}


def run_models(cfg: dict[str, Any], world: dict[str, Any], seed: int) -> dict[str, dict]:
    """Train every model on the world; return its predictions and costs."""
    out: dict[str, dict] = {}
    models = dict(DIFFUSION, **(ABLATIONS if cfg["ablations"] else {}))
    for k, (name, kw) in enumerate(models.items()):
        torch.manual_seed(1000 * seed + k)
        model = EOWorldModel(model_config(cfg, **kw))
        g = torch.Generator().manual_seed(seed)
        t = time.perf_counter()
        train_model(model, world["train"], cfg["steps"], cfg["batch"], cfg["lr"], generator=g)
        train_s = time.perf_counter() - t
        if not model.has_cross:
            out[name] = _sample_all(cfg, world, seed, model, 1.0, train_s)
            continue
        w, val_scores = _choose_guidance(cfg, world, seed, model)
        sampled = _sample_all(cfg, world, seed, model, w, train_s)
        out[name] = {**sampled, **val_scores}
        if name == "eo_wm":
            # the same trained model without guidance: the guidance's share of the fix
            plain = sampled if w == 1.0 else _sample_all(cfg, world, seed, model, 1.0, train_s)
            out[f"{name}_no_guidance"] = {**plain, "guidance_w": 1.0}
    torch.manual_seed(1000 * seed + 99)
    lstm = ConvLSTMForecaster(4, 3, 3, 12, hidden=cfg["lstm_hidden"])
    t = time.perf_counter()
    train_convlstm(
        lstm,
        world["train"],
        cfg["steps"],
        cfg["batch"],
        cfg["lr"],
        generator=torch.Generator().manual_seed(seed),
    )
    train_s = time.perf_counter() - t
    t = time.perf_counter()
    pr = {s: predict_convlstm(lstm, world[s]).numpy()[None] for s in SETS}
    n_win = sum(len(world[s]["context"]) for s in SETS)
    out["convlstm"] = {
        "members": pr,
        "train_s": train_s,
        "calls_per_window": 1,
        "sample_s_per_window": (time.perf_counter() - t) / n_win,
        "params": sum(p.numel() for p in lstm.parameters()),
    }
    out["persistence"] = {
        "members": {
            s: persistence_forecast(
                world[s]["context"].numpy(), world[s]["context_mask"].numpy(), 12
            )[None]
            for s in SETS
        }
    }
    return out


def evaluate(world: dict[str, Any], pred: dict[str, Any], clim: bool = False) -> dict[str, float]:
    """Every metric of one model on one world (ensemble mean for deterministic metrics)."""
    ev = world["eval"]
    tgt, tmask = ev["target"], ev["target_mask"]
    gt_traj = frame_ndvi(tgt, tgt, tmask)
    ctx_traj = frame_ndvi(ev["context"], ev["context"], ev["context_mask"])
    base = M.baseline_ndvi(ctx_traj)
    gt_nd = M.ndvi(tgt)
    if clim:  # NDVI-only forecast
        p_nd = ev["clim_ndvi"]
        mem_traj = M.ndvi_trajectory(np.nan_to_num(p_nd, nan=0.0), gt_nd, tmask)[None]
        out = {"ndvi_mae": _nd_mae(p_nd, gt_nd, tmask)}
    else:
        members = pred["members"]["eval_t"]
        mean = members.mean(0)
        mem_traj = np.stack([frame_ndvi(m, tgt, tmask) for m in members])
        out = {"pixel_mae": M.pixel_mae(mean, tgt, tmask), "ndvi_mae": M.ndvi_mae(mean, tgt, tmask)}
    traj = mem_traj.mean(0) if clim else frame_ndvi(pred["members"]["eval_t"].mean(0), tgt, tmask)
    e = world["extreme"]
    dae = M.drop_amplitude_error(traj[e], gt_traj[e], base[e])
    bins = M.severity_bins(M.gt_drop(gt_traj[e], base[e]))
    out.update(
        es_dae=float(np.nanmean(dae)),
        es_dae_low=float(np.nanmean(dae[bins == 0])),
        es_dae_high=float(np.nanmean(dae[bins == 2])),
        es_trough_mae=float(np.nanmean(M.trough_ndvi_mae(traj[e], gt_traj[e]))),
    )
    pa, pb = world["pairs"][:, 0], world["pairs"][:, 1]
    args = (traj[pa], traj[pb], gt_traj[pa], gt_traj[pb])
    out.update(
        sp_dhr=M.directional_hit_rate(*args),
        sp_drr=M.divergence_reproduction_ratio(*args),
        sp_pdc=M.paired_divergence_correlation(*args),
    )
    crps = M.crps_ensemble(mem_traj, gt_traj)
    out["ndvi_crps"] = float(np.nanmean(crps))
    if mem_traj.shape[0] > 1:
        out["spread_skill"] = M.spread_skill(mem_traj, gt_traj)
    if not clim:
        out.update(_cf_metrics(world, pred))
    return out


def _nd_mae(p_nd: np.ndarray, gt_nd: np.ndarray, mask: np.ndarray) -> float:
    keep = (mask[:, :, 0] > 0.5) & M.vegetation_mask(gt_nd) & np.isfinite(p_nd)
    return float(np.abs(p_nd - gt_nd)[keep].mean())


def _cf_metrics(world: dict[str, Any], pred: dict[str, Any]) -> dict[str, float]:
    cf_a, cf_b = world["cf_np"]
    n = world["n_cf"]
    mean = pred["members"]["cf"].mean(0)
    ta = frame_ndvi(mean[:n], cf_a["target"], cf_a["target_mask"])
    tb = frame_ndvi(mean[n:], cf_b["target"], cf_b["target_mask"])
    ga = frame_ndvi(cf_a["target"], cf_a["target"], cf_a["target_mask"])
    gb = frame_ndvi(cf_b["target"], cf_b["target"], cf_b["target_mask"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return {
            "cf_dhr": M.directional_hit_rate(ta, tb, ga, gb),
            "cf_drr": M.divergence_reproduction_ratio(ta, tb, ga, gb),
            "cf_pdc": M.paired_divergence_correlation(ta, tb, ga, gb),
        }


def calibration(world: dict[str, Any]) -> dict[str, float]:
    """How much room the world leaves: GT drops of the extreme set, pair divergence, sizes."""
    ev = world["eval"]
    gt = frame_ndvi(ev["target"], ev["target"], ev["target_mask"])
    base = M.baseline_ndvi(frame_ndvi(ev["context"], ev["context"], ev["context_mask"]))
    e, p = world["extreme"], world["pairs"]
    cf_a, cf_b = world["cf_np"]
    ga = frame_ndvi(cf_a["target"], cf_a["target"], cf_a["target_mask"])
    gb = frame_ndvi(cf_b["target"], cf_b["target"], cf_b["target_mask"])
    return {
        "es_gt_drop_mean": float(np.nanmean(M.gt_drop(gt[e], base[e]))),
        "sp_gt_steps_over_0.02": float(np.mean(np.abs(gt[p[:, 0]] - gt[p[:, 1]]) > 0.02)),
        "cf_gt_steps_over_0.02": float(np.mean(np.abs(ga - gb) > 0.02)),
        "n_extreme": float(len(e)),
        "n_pairs": float(len(p)),
        "n_cf": float(world["n_cf"]),
    }


def sensitivity(world: dict[str, Any], pred: dict[str, Any]) -> dict[str, float]:
    """How much a model's forecast follows the weather: swapped and scaled future forcing.

    Swap (counterfactual pairs: same state and context, another year's future forcing; the
    simulator gives the true future under both): ``swap_ratio`` = mean |forecast NDVI change|
    / mean |true NDVI change| over pair steps (1 = follows the truth's amplitude, 0 = ignores
    the weather); ``swap_mae_increase_pct``: NDVI MAE against the window's own truth when
    forecasting with the partner's forcing, relative to its own forcing (``cf_ndvi_mae``).
    Dose (event windows, future anomaly scaled by k in ``DOSE_SCALES``, truth re-simulated):
    ``dose_slope`` = trough NDVI lost per unit of k (least squares per window, mean; > 0 =
    hotter/drier gives a lower trough), ``dose_ratio`` = that over the simulator's slope,
    ``dose_lower_share`` = share of windows whose trough is lower at the largest k than at the
    next one. Frame NDVI uses the vegetation and validity of the k = 1 truth for every k.
    """
    cf_a = world["cf_np"][0]
    n = world["n_cf"]
    mean = pred["members"]["cf"].mean(0)
    ta = frame_ndvi(mean[:n], cf_a["target"], cf_a["target_mask"])
    tb = frame_ndvi(mean[n:], cf_a["target"], cf_a["target_mask"])
    ga, gb = _gt_swap(world)
    own = M.ndvi_mae(mean[:n], cf_a["target"], cf_a["target_mask"])
    swapped = M.ndvi_mae(mean[n:], cf_a["target"], cf_a["target_mask"])
    troughs = _dose_troughs(world, pred["members"]["dose"].mean(0))
    slope = _slopes(troughs)
    gt_slope = _slopes(_dose_troughs(world, None))
    return {
        "swap_ratio": float(np.nanmean(np.abs(ta - tb)) / np.nanmean(np.abs(ga - gb))),
        "swap_mae_increase_pct": float(100.0 * (swapped / own - 1.0)),
        "cf_ndvi_mae": float(own),
        "dose_slope": float(np.nanmean(slope)),
        "dose_ratio": float(np.nanmean(slope) / np.nanmean(gt_slope)),
        "dose_lower_share": float(np.mean(troughs[:, -1] < troughs[:, -2])),
    }


def _gt_swap(world: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """True frame NDVI of the pairs, both on the vegetation/validity of window ``a``."""
    cf_a, cf_b = world["cf_np"]
    ga = frame_ndvi(cf_a["target"], cf_a["target"], cf_a["target_mask"])
    gb = frame_ndvi(cf_b["target"], cf_a["target"], cf_a["target_mask"])
    return ga, gb


def _dose_troughs(world: dict[str, Any], mean: np.ndarray | None) -> np.ndarray:
    """Trough frame NDVI ``(windows, scales)`` of forecasts (``None``: of the truth)."""
    doses = world["dose_np"]
    ref = doses[DOSE_SCALES.index(1.0)]
    n = len(ref["target"])
    out = []
    for k, w in enumerate(doses):
        frames = w["target"] if mean is None else mean[k * n : (k + 1) * n]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            traj = frame_ndvi(frames, ref["target"], ref["target_mask"])
            out.append(np.nanmin(traj, 1))
    return np.stack(out, 1)


def _slopes(troughs: np.ndarray) -> np.ndarray:
    """Per window, minus the least-squares slope of trough NDVI over the dose scales."""
    k = np.asarray(DOSE_SCALES) - np.mean(DOSE_SCALES)
    return -(troughs - troughs.mean(1, keepdims=True)) @ k / (k @ k)


def sensitivity_world(world: dict[str, Any]) -> dict[str, float]:
    """The truth's own response: what a forecast that follows the weather would show."""
    ga, gb = _gt_swap(world)
    troughs = _dose_troughs(world, None)
    return {
        "gt_swap_change": float(np.nanmean(np.abs(ga - gb))),
        "gt_dose_slope": float(np.nanmean(_slopes(troughs))),
        "gt_dose_lower_share": float(np.mean(troughs[:, -1] < troughs[:, -2])),
        "n_dose": float(len(troughs)),
    }


HIGHER = {"sp_dhr": True, "cf_dhr": True, "sp_pdc": True, "cf_pdc": True}
SENS_HIGHER: dict[str, bool | None] = {
    "swap_ratio": True,
    "swap_mae_increase_pct": None,
    "cf_ndvi_mae": False,
    "dose_slope": None,
    "dose_ratio": True,
    "dose_lower_share": True,
}
COSTS = ("train_s", "sample_s_per_window", "calls_per_window", "params", "guidance_w")
_CACHE: dict[tuple[int, int], dict[str, dict[str, dict[str, float]]]] = {}


def _info(key: str) -> bool:
    """Per-model scalars copied into the record: costs, chosen w, validation scores."""
    return key in COSTS or key.startswith("val_")


def run_seed(cfg: dict[str, Any], seed: int) -> dict[str, dict[str, dict[str, float]]]:
    """One world and every model on it, cached per (config, seed) within the process.

    Returns ``{"weather": {model: {metric: value}, "_world": ...}, "sensitivity": {...}}``:
    both suites read the same trained models when they run in one process.
    """
    key = (id(cfg), seed)
    if key not in _CACHE:
        world = build_world(cfg, seed)
        preds = run_models(cfg, world, seed)
        weather = {
            name: {**evaluate(world, p), **{c: float(v) for c, v in p.items() if _info(c)}}
            for name, p in preds.items()
        }
        weather["climatology"] = evaluate(world, None, clim=True)
        weather["_world"] = {**calibration(world), "sim_s": world["sim_s"]}
        sens = {name: sensitivity(world, p) for name, p in preds.items()}
        sens["_world"] = sensitivity_world(world)
        _CACHE[key] = {"weather": weather, "sensitivity": sens}
    return _CACHE[key]


def rows(per_seed: list[dict[str, dict[str, float]]]) -> list[tuple[str, str, list[float], Any]]:
    """``(method, metric, values over seeds, higher_is_better)`` for every cell measured."""
    out = []
    for name, mets in per_seed[0].items():
        for met in mets:
            vals = [s[name][met] for s in per_seed if met in s[name]]
            hib = (
                None
                if name == "_world" or met in COSTS
                else SENS_HIGHER.get(met, HIGHER.get(met, False))
            )
            out.append(("world" if name == "_world" else name, met, vals, hib))
    return out


def mean(per_seed: list[dict[str, dict[str, float]]], name: str, met: str) -> float:
    vals = [s[name].get(met, np.nan) for s in per_seed]
    return float(np.mean(vals)) if vals else float("nan")
