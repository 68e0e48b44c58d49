"""Windows and benchmark sets cut from simulated cubes (or any cube of the same layout).

A cube is :meth:`eo_wm.simulator.LandSurfaceSimulator.simulate`'s dict: ``frames (L, T, C, H, W)``,
``mask``, ``weather (L, T, m)``, ``doy (T,)``, ``heatwave``/``drought (L, T)`` and ``static``.
Sets: training windows (:func:`make_dataset`), summer windows, the Extreme Summer subset, the
Seasonal Matched-Pairs, the counterfactual pairs (same state and context, swapped future forcing)
and the dose-response set (the same future under scaled forcing anomalies).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from eo_wm.metrics import baseline_ndvi, gt_drop, ndvi, ndvi_trajectory

if TYPE_CHECKING:  # weather imports scikit-learn (and scipy): only for the annotations here
    from eo_wm.simulator import LandSurfaceSimulator, SimState
    from eo_wm.weather import WeatherDecomposer

WINDOW_KEYS = ("context", "context_mask", "target", "target_mask", "weather", "doy")


def window(
    cube: dict, loc: int, t0: int, t_context: int = 8, t_future: int = 12
) -> dict[str, np.ndarray]:
    """One window of scene ``loc`` starting at step ``t0`` (context then target)."""
    T = t_context + t_future
    if t0 < 0 or t0 + T > cube["frames"].shape[1]:
        raise ValueError(
            f"window [{t0}, {t0 + T}) is outside the cube's {cube['frames'].shape[1]} steps"
        )
    sl, fut = slice(t0, t0 + t_context), slice(t0 + t_context, t0 + T)
    return {
        "context": cube["frames"][loc, sl],
        "context_mask": cube["mask"][loc, sl],
        "target": cube["frames"][loc, fut],
        "target_mask": cube["mask"][loc, fut],
        "static": cube["static"][loc],
        "weather": cube["weather"][loc, t0 : t0 + T],
        "doy": cube["doy"][t0 : t0 + T],
        "event": np.asarray(cube["heatwave"][loc, fut].any() | cube["drought"][loc, fut].any()),
        "location": np.asarray(loc),
        "start": np.asarray(t0),
    }


def stack_windows(items: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Stack window dicts along a new leading axis."""
    if not items:
        raise ValueError("no windows to stack")
    return {k: np.stack([w[k] for w in items]) for k in items[0]}


def make_dataset(
    cube: dict,
    n_windows: int,
    seed: int,
    t_context: int = 8,
    t_future: int = 12,
    locations: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """``n_windows`` windows at random scenes and start steps (training sets)."""
    rng = np.random.default_rng(seed)
    locs = np.arange(cube["frames"].shape[0]) if locations is None else np.asarray(locations)
    last = cube["frames"].shape[1] - (t_context + t_future)
    return stack_windows(
        [
            window(cube, int(rng.choice(locs)), int(rng.integers(0, last + 1)), t_context, t_future)
            for _ in range(n_windows)
        ]
    )


def summer_windows(
    cube: dict,
    starts: tuple[int, ...] = (22, 26, 30),
    t_context: int = 8,
    t_future: int = 12,
    steps_per_year: int = 73,
) -> dict[str, np.ndarray]:
    """Every (scene, year, start-in-year) window whose target covers early to late summer."""
    L, n = cube["frames"].shape[:2]
    items = [
        window(cube, loc, y * steps_per_year + s, t_context, t_future)
        for loc in range(L)
        for y in range(n // steps_per_year)
        for s in starts
    ]
    out = stack_windows(items)
    out["year"] = out["start"] // steps_per_year
    return out


def frame_ndvi(frames: np.ndarray, gt_frames: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Frame NDVI trajectories (vegetation from ``gt_frames``) of windows ``(N, T, 4, H, W)``."""
    return ndvi_trajectory(ndvi(frames), ndvi(gt_frames), mask)


def make_extreme_summer(windows: dict[str, np.ndarray], min_drop: float = 0.05) -> np.ndarray:
    """Indices of windows whose target holds a heatwave/drought and GT drop >= ``min_drop``."""
    ctx = frame_ndvi(windows["context"], windows["context"], windows["context_mask"])
    tgt = frame_ndvi(windows["target"], windows["target"], windows["target_mask"])
    drop = gt_drop(tgt, baseline_ndvi(ctx))
    return np.nonzero(windows["event"] & (np.nan_to_num(drop, nan=-1) >= min_drop))[0]


def make_seasonal_pairs(
    windows: dict[str, np.ndarray],
    t_context: int = 8,
    min_temp_diff: float = 1.5,
    n_pairs: int | None = None,
    seed: int = 0,
) -> np.ndarray:
    """Pairs ``(i, j)`` of windows: same scene and start, different years, differing forcing.

    Kept when the forecast-horizon mean |temperature difference| exceeds ``min_temp_diff`` C or
    exactly one of the two holds a heatwave/drought. ``n_pairs`` subsamples (seeded).
    """
    pairs = []
    key = windows["location"] * 10_000 + windows["start"] % 73
    for k in np.unique(key):
        idx = np.nonzero(key == k)[0]
        for a in range(len(idx)):
            for b in range(a + 1, len(idx)):
                i, j = idx[a], idx[b]
                dt = np.abs(
                    windows["weather"][i, t_context:, 0] - windows["weather"][j, t_context:, 0]
                )
                if dt.mean() > min_temp_diff or windows["event"][i] != windows["event"][j]:
                    pairs.append((i, j))
    out = np.asarray(pairs, dtype=int).reshape(-1, 2)
    if n_pairs is not None and len(out) > n_pairs:
        out = out[np.sort(np.random.default_rng(seed).choice(len(out), n_pairs, replace=False))]
    return out


def _observed_context(
    sim: LandSurfaceSimulator,
    cube: dict,
    loc: int,
    t0: int,
    t_context: int,
    t_future: int,
    rng: np.random.Generator,
) -> tuple[SimState, np.ndarray, dict[str, np.ndarray]]:
    """Re-run the simulator to a window start and observe its context once.

    Returns the hidden state after the context, the window's own forcing and the window's
    fields shared by every future simulated from that state.
    """
    state = sim.state_at(cube, [loc], t0, seed=int(rng.integers(2**31)))
    W = cube["weather"][loc, t0 : t0 + t_context + t_future]
    d = cube["doy"][t0 : t0 + t_context + t_future]
    V_ctx, state = sim.run(state, W[None, :t_context], d[:t_context], rng, locations=[loc])
    ctx, cmask = sim.observe(V_ctx[0], rng)
    row = {
        "context": ctx,
        "context_mask": cmask,
        "static": cube["static"][loc],
        "doy": d,
        "location": np.asarray(loc),
        "start": np.asarray(t0),
    }
    return state, W, row


def _future(
    sim: LandSurfaceSimulator,
    state: SimState,
    row: dict[str, np.ndarray],
    ww: np.ndarray,
    t_context: int,
    seeds: tuple[int, int],
) -> dict[str, np.ndarray]:
    """The window ``row`` with its future simulated from ``state`` under forcing ``ww``.

    The simulator and observation noise come from ``seeds``, so futures under different
    forcings of the same window differ only through the forcing.
    """
    d, loc = row["doy"], int(row["location"])
    V_f, _ = sim.run(
        state, ww[None, t_context:], d[t_context:], np.random.default_rng(seeds[0]), locations=[loc]
    )
    tgt, tmask = sim.observe(V_f[0], np.random.default_rng(seeds[1]))
    return {**row, "target": tgt, "target_mask": tmask, "weather": ww}


def make_counterfactual_pairs(
    sim: LandSurfaceSimulator,
    cube: dict,
    n_pairs: int,
    seed: int,
    starts: tuple[int, ...] = (22, 26, 30),
    t_context: int = 8,
    t_future: int = 12,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Windows ``a`` and ``b`` with identical hidden state and context, swapped future forcing.

    For a scene, year and start, the simulator is re-run to the window start; the context is
    observed once; the future is simulated twice from the same state with the same noise: under
    the year's own forcing (``a``) and under another year's forcing of the same days (``b``).
    Half of the pairs are drawn where one of the two futures holds a heatwave/drought.
    """
    rng = np.random.default_rng(seed)
    S = sim.steps_per_year
    L, n = cube["frames"].shape[:2]
    n_years = n // S
    if n_years < 2:
        raise ValueError("counterfactual pairs need at least 2 simulated years")
    event = cube["heatwave"] | cube["drought"]
    A, B = [], []
    for k in range(n_pairs):
        for _ in range(1000):
            loc, s0 = int(rng.integers(L)), int(rng.choice(starts))
            y, y2 = rng.choice(n_years, 2, replace=False)
            t0, t1 = y * S + s0, y2 * S + s0
            ev = (
                event[loc, t0 + t_context : t0 + t_context + t_future].any()
                or event[loc, t1 + t_context : t1 + t_context + t_future].any()
            )
            if ev or k % 2:
                break
        state, W, row = _observed_context(sim, cube, loc, t0, t_context, t_future, rng)
        seeds = int(rng.integers(2**31)), int(rng.integers(2**31))
        other = cube["weather"][loc, t1 + t_context : t1 + t_context + t_future]
        pair = [
            _future(sim, state, {**row, "event": np.asarray(bool(ev))}, ww, t_context, seeds)
            for ww in (W, np.concatenate([W[:t_context], other]))
        ]
        A.append(pair[0])
        B.append(pair[1])
    return stack_windows(A), stack_windows(B)


def to_tensors(windows: dict[str, np.ndarray], decomposer: WeatherDecomposer | None = None) -> dict:
    """Float32 tensors of a window dict (plus the decomposition when given a decomposer).

    ``decomposer``: a fitted :class:`~eo_wm.weather.WeatherDecomposer`; adds ``baseline``,
    ``anomaly`` and ``stress``.
    """
    out = {
        k: torch.as_tensor(np.asarray(v, dtype=np.float32))
        for k, v in windows.items()
        if k in (*WINDOW_KEYS, "static")
    }
    if decomposer is not None:
        parts = decomposer.transform(windows["weather"], windows["doy"])
        for k in ("baseline", "anomaly", "stress"):
            out[k] = torch.as_tensor(parts[k], dtype=torch.float32)
    return out


def event_window_starts(
    cube: dict,
    starts: tuple[int, ...] = (22, 26, 30),
    t_context: int = 8,
    t_future: int = 12,
    steps_per_year: int = 73,
) -> list[tuple[int, int]]:
    """``(scene, first step)`` of every summer window whose target holds a heatwave/drought."""
    S, T = steps_per_year, t_context + t_future
    L, n = cube["frames"].shape[:2]
    event = cube["heatwave"] | cube["drought"]
    return [
        (loc, y * S + s0)
        for loc in range(L)
        for y in range(n // S)
        for s0 in starts
        if y * S + s0 + T <= n and event[loc, y * S + s0 + t_context : y * S + s0 + T].any()
    ]


def make_dose_response(
    sim: LandSurfaceSimulator,
    cube: dict,
    decomposer: WeatherDecomposer,
    n_windows: int,
    seed: int,
    scales: tuple[float, ...] = (0.0, 1.0, 2.0),
    starts: tuple[int, ...] = (22, 26, 30),
    t_context: int = 8,
    t_future: int = 12,
) -> list[dict[str, np.ndarray]]:
    """The same windows with their future forcing anomaly scaled by each of ``scales``.

    Windows are drawn (seeded) among summer windows whose target holds a heatwave or a
    drought. For each, the simulator is re-run to the window start, the context is observed
    once, and the future is simulated from that same state with the same noise under the
    forcing ``B + k (W - B)`` (``B`` the decomposer's climatology, precipitation clipped at 0)
    for every ``k`` in ``scales``: ``k = 0`` is a normal summer, ``k = 1`` the real one,
    ``k = 2`` a doubled anomaly. Returns one window dict per scale, rows aligned.

    Raises:
        ValueError: If ``scales`` is empty, ``n_windows < 1`` or the cube holds no event window.
    """
    if not scales or n_windows < 1:
        raise ValueError(f"need scales and n_windows >= 1, got {scales}, {n_windows}")
    rng = np.random.default_rng(seed)
    cands = event_window_starts(cube, starts, t_context, t_future, sim.steps_per_year)
    if not cands:
        raise ValueError("the cube holds no summer window with a heatwave or drought")
    pick = rng.choice(len(cands), min(n_windows, len(cands)), replace=False)
    out: list[list[dict[str, np.ndarray]]] = [[] for _ in scales]
    for c in np.sort(pick):
        loc, t0 = cands[int(c)]
        state, W, row = _observed_context(sim, cube, loc, t0, t_context, t_future, rng)
        base, _ = decomposer.climatology(row["doy"])
        seeds = int(rng.integers(2**31)), int(rng.integers(2**31))
        for k, scale in enumerate(scales):
            ww = W.copy()
            ww[t_context:] = base[t_context:] + scale * (W[t_context:] - base[t_context:])
            ww[:, 1] = np.maximum(ww[:, 1], 0.0)  # precipitation stays >= 0
            out[k].append(
                _future(sim, state, {**row, "event": np.asarray(True)}, ww, t_context, seeds)
            )
    return [stack_windows(rows) for rows in out]
