"""Offline land-surface simulator with a hidden soil-moisture state, and the benchmark sets.

Scenes of ``grid x grid`` pixels, 5-day steps (73 per year). Static fields: smooth elevation,
land cover (crop / grass / forest / bare) with their own heat and water sensitivities, maximum
greenness ``V_max`` and soil water capacity. Scene weather: temperature = climatology + AR(1)
anomaly + summer heatwaves, precipitation = climatology x Gamma(0.8) noise (suppressed in
droughts that co-occur with 60 % of heatwaves), radiation anti-correlated with precipitation.
Hidden soil moisture ``SM += P - ET`` and vegetation

``V += kappa (V_max phen(d) - V) - beta_h max(0, T - T_crit) V - beta_w max(0, 1 - SM/(0.4 cap)) V``

drive reflectances ``V rho_veg + (1 - V) rho_soil + noise``; 20 % of frames carry cloud blobs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from eo_wm.weather import WeatherDecomposer

BANDS = ("B", "G", "R", "NIR")
VARIABLES = ("temp", "precip", "rad")
RHO_VEG = np.array([0.03, 0.06, 0.04, 0.45])
RHO_SOIL = np.array([0.10, 0.14, 0.18, 0.24])
# per land cover (crop, grass, forest, bare): V_max range, kappa, beta_h, beta_w, T_crit
_COVER = {
    "vmax_lo": np.array([0.60, 0.40, 0.70, 0.20]),
    "vmax_hi": np.array([0.90, 0.70, 0.90, 0.30]),
    "kappa": np.array([0.15, 0.12, 0.06, 0.05]),
    "beta_h": np.array([0.040, 0.030, 0.015, 0.005]),
    "beta_w": np.array([0.14, 0.10, 0.04, 0.02]),
    "t_crit": np.array([20.0, 21.0, 23.0, 25.0]),
}
LAPSE = 6.5  # C per km


def _phenology(doy: np.ndarray) -> np.ndarray:
    """Double-logistic seasonal greenness factor in (0.15, 1)."""
    up = 1.0 / (1.0 + np.exp(-(doy - 110.0) / 10.0))
    down = 1.0 / (1.0 + np.exp(-(doy - 285.0) / 12.0))
    return 0.15 + 0.85 * (up - down)


@dataclass
class SimState:
    """Hidden state of every scene: vegetation ``V`` and soil moisture ``SM`` (L, H, W)."""

    V: np.ndarray
    SM: np.ndarray

    def copy(self) -> SimState:
        """An independent copy."""
        return SimState(self.V.copy(), self.SM.copy())


class LandSurfaceSimulator:
    """Scenes with static fields, weather and a hidden soil-moisture bucket.

    Args:
        n_locations: Number of scenes.
        grid: Pixels per side.
        bands: Number of bands (4: B, G, R, NIR).
        steps_per_year: Time steps per year (73 = 5-day steps).
        seed: Seed of the static fields and all weather.

    Example:
        >>> sim = LandSurfaceSimulator(n_locations=2, grid=8, seed=0)
        >>> cube = sim.simulate(n_years=1)
        >>> cube["frames"].shape
        (2, 73, 4, 8, 8)
    """

    def __init__(
        self,
        n_locations: int = 8,
        grid: int = 16,
        bands: int = 4,
        steps_per_year: int = 73,
        seed: int = 0,
    ) -> None:
        if bands != 4:
            raise ValueError(f"bands must be 4 (B, G, R, NIR), got {bands}")
        if grid < 4 or n_locations < 1:
            raise ValueError(f"need grid >= 4 and n_locations >= 1, got {grid}, {n_locations}")
        self.n_locations, self.grid, self.bands = n_locations, grid, bands
        self.steps_per_year = steps_per_year
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self._make_static()

    def _smooth(self, sigma: float) -> np.ndarray:
        z = self.rng.normal(size=(self.n_locations, self.grid, self.grid))
        from scipy.ndimage import gaussian_filter  # lazy: keeps `import eo_wm` light

        z = np.stack([gaussian_filter(zi, sigma, mode="wrap") for zi in z])
        return (z - z.mean()) / (z.std() + 1e-12)

    def _make_static(self) -> None:
        L = self.n_locations
        elev = 0.2 + 0.8 * _sigmoid(self._smooth(3.0) + self.rng.normal(0, 0.7, (L, 1, 1)))
        cover_field = self._smooth(2.0)
        q = np.quantile(cover_field, [0.35, 0.65, 0.9])
        cover = np.digitize(cover_field, q)  # 0 crop, 1 grass, 2 forest, 3 bare
        lo, hi = _COVER["vmax_lo"][cover], _COVER["vmax_hi"][cover]
        self.elevation = elev  # km
        self.cover = cover
        self.vmax = lo + (hi - lo) * self.rng.uniform(size=cover.shape)
        self.capacity = 60.0 + 60.0 * _sigmoid(self._smooth(2.5))  # mm
        self.kappa: np.ndarray = _COVER["kappa"][cover]
        self.beta_h: np.ndarray = _COVER["beta_h"][cover]
        self.beta_w: np.ndarray = _COVER["beta_w"][cover]
        self.t_crit: np.ndarray = _COVER["t_crit"][cover]

    @property
    def static(self) -> np.ndarray:
        """Static maps ``(L, 3, H, W)``: elevation, V_max, soil water capacity (scaled)."""
        return np.stack([self.elevation, self.vmax, self.capacity / 100.0], 1).astype(np.float32)

    # -- weather -------------------------------------------------------------------------
    def doy(self, n_steps: int, start: int = 0) -> np.ndarray:
        """Day of year (1..365) of steps ``start .. start + n_steps - 1``."""
        k = (np.arange(start, start + n_steps) % self.steps_per_year).astype(np.float64)
        return 1.0 + k * 365.0 / self.steps_per_year

    def weather(self, n_years: int, rng: np.random.Generator | None = None) -> dict:
        """Scene weather ``(L, n_years * steps_per_year, 3)`` (temp C, precip mm, rad W/m2)."""
        rng = self.rng if rng is None else rng
        L, S = self.n_locations, self.steps_per_year
        n = n_years * S
        d = self.doy(n)
        t_clim = 11.0 + 10.0 * np.sin(2 * np.pi * (d - 105.0) / 365.0)
        p_clim = 12.0 + 4.0 * np.cos(2 * np.pi * (d - 15.0) / 365.0)
        r_clim = 200.0 + 100.0 * np.sin(2 * np.pi * (d - 80.0) / 365.0)
        anom = np.zeros((L, n))
        innov = rng.normal(0.0, 1.5 * np.sqrt(1 - 0.7**2), (L, n))
        for t in range(1, n):
            anom[:, t] = 0.7 * anom[:, t - 1] + innov[:, t]
        heat = np.zeros((L, n))
        dry = np.zeros((L, n), dtype=bool)
        for loc in range(L):
            for y in range(n_years):
                if rng.uniform() < 0.15:
                    start = y * S + rng.integers(int(0.42 * S), int(0.62 * S))
                    dur = int(rng.integers(3, 9))
                    heat[loc, start : start + dur] += rng.uniform(4.0, 8.0)
                    if rng.uniform() < 0.6:
                        dry[loc, max(0, start - 2) : start + dur] = True
        temp = t_clim + anom + heat
        precip = p_clim * rng.gamma(0.8, 1.0 / 0.8, (L, n)) * np.where(dry, 0.08, 1.0)
        ratio = np.minimum(precip / p_clim, 3.0)
        rad = r_clim * (1.15 - 0.15 * ratio) + 8.0 * heat + rng.normal(0, 10.0, (L, n))
        W = np.stack([temp, precip, rad], -1)
        return {"weather": W, "doy": d, "heatwave": heat > 0, "drought": dry}

    # -- dynamics ------------------------------------------------------------------------
    def initial_state(self, doy: float = 1.0) -> SimState:
        """Vegetation at its phenological level, soil at 70 % of capacity."""
        V = self.vmax * _phenology(np.asarray(doy))
        return SimState(V.copy(), 0.7 * self.capacity)

    def run(
        self,
        state: SimState,
        weather: np.ndarray,
        doy: np.ndarray,
        rng: np.random.Generator,
        locations: ArrayLike | None = None,
    ) -> tuple[np.ndarray, SimState]:
        """Advance ``state`` through ``weather (L', T, 3)``; return ``V (L', T, H, W)``, state.

        ``locations`` selects the scenes ``state`` belongs to (default all).
        """
        idx = np.arange(self.n_locations) if locations is None else np.asarray(locations)
        st = state.copy()
        T = weather.shape[1]
        out = np.empty((len(idx), T, *st.V.shape[1:]))
        elev, vmax, cap = self.elevation[idx], self.vmax[idx], self.capacity[idx]
        kap, bh, bw, tc = self.kappa[idx], self.beta_h[idx], self.beta_w[idx], self.t_crit[idx]
        noise = np.asarray(rng.normal(0.0, 0.004, size=out.shape))
        for t in range(T):
            temp = weather[:, t, 0, None, None] - LAPSE * elev
            precip = weather[:, t, 1, None, None]
            et = 2.2 * np.maximum(temp, 0.0) * (0.4 + st.V) * (st.SM / cap)
            st.SM = np.clip(st.SM + precip - et, 0.0, cap)
            target = vmax * _phenology(np.asarray(doy[t]))
            heat = bh * np.maximum(0.0, temp - tc) * st.V
            water = bw * np.maximum(0.0, 1.0 - st.SM / (0.4 * cap)) * st.V
            st.V = np.clip(st.V + kap * (target - st.V) - heat - water + noise[:, t], 0.0, 1.0)
            out[:, t] = st.V
        return out, st

    def observe(
        self, V: np.ndarray, rng: np.random.Generator, cloud_prob: float = 0.2
    ) -> tuple[np.ndarray, np.ndarray]:
        """Reflectance frames ``(..., T, 4, H, W)`` and validity masks ``(..., T, 1, H, W)``."""
        refl = (
            V[..., None, :, :] * RHO_VEG[:, None, None]
            + (1 - V[..., None, :, :]) * (RHO_SOIL[:, None, None])
        )
        refl = refl + rng.normal(0.0, 0.01, refl.shape)
        mask = np.ones((*V.shape[:-2], 1, *V.shape[-2:]), dtype=np.float32)
        cloudy = rng.uniform(size=V.shape[:-2]) < cloud_prob
        g = self.grid
        yy, xx = np.mgrid[0:g, 0:g]
        for ix in zip(*np.nonzero(cloudy), strict=True):
            cy, cx = rng.uniform(0, g, 2)
            r = rng.uniform(0.2, 0.6) * g
            blob = (yy - cy) ** 2 + (xx - cx) ** 2 < r**2
            mask[ix][0][blob] = 0.0
            refl[ix][:, blob] = 0.5 + rng.normal(0, 0.02, (4, int(blob.sum())))
        return refl.astype(np.float32), mask

    def simulate(self, n_years: int, spin_up_years: int = 1) -> dict:
        """Simulate every scene for ``n_years`` (after a spin-up); return the full cubes."""
        S = self.steps_per_year
        met = self.weather(n_years + spin_up_years)
        state = self.initial_state()
        V, state = self.run(state, met["weather"], met["doy"], self.rng)
        # hidden-state snapshots at every step let counterfactuals restart mid-year
        cut = spin_up_years * S
        frames, mask = self.observe(V[:, cut:], self.rng)
        return {
            "frames": frames,
            "mask": mask,
            "V": V[:, cut:],
            "weather": met["weather"][:, cut:],
            "doy": met["doy"][cut:],
            "heatwave": met["heatwave"][:, cut:],
            "drought": met["drought"][:, cut:],
            "static": self.static,
            "spin_weather": met["weather"][:, :cut],
        }

    def state_at(self, cube: dict, locations: ArrayLike, step: int, seed: int) -> SimState:
        """Re-run scenes ``locations`` from the start to ``step`` (exclusive) with fresh noise.

        Used by counterfactual pairs: the hidden state at the window start, reproducible.
        """
        idx = np.asarray(locations)
        W = np.concatenate([cube["spin_weather"][idx], cube["weather"][idx, :step]], 1)
        d = self.doy(W.shape[1])
        init = self.initial_state()
        st = SimState(init.V[idx], init.SM[idx])
        _, st = self.run(st, W, d, np.random.default_rng(seed), locations=idx)
        return st


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# -- windows and benchmark sets ------------------------------------------------------------
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
    from eo_wm.metrics import ndvi, ndvi_trajectory

    return ndvi_trajectory(ndvi(frames), ndvi(gt_frames), mask)


def make_extreme_summer(windows: dict[str, np.ndarray], min_drop: float = 0.05) -> np.ndarray:
    """Indices of windows whose target holds a heatwave/drought and GT drop >= ``min_drop``."""
    from eo_wm.metrics import baseline_ndvi, gt_drop

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
        state = sim.state_at(cube, [loc], t0, seed=int(rng.integers(2**31)))
        W = cube["weather"][loc, t0 : t0 + t_context + t_future]
        d = cube["doy"][t0 : t0 + t_context + t_future]
        V_ctx, state = sim.run(state, W[None, :t_context], d[:t_context], rng, locations=[loc])
        ctx, cmask = sim.observe(V_ctx[0], rng)
        pair = []
        fut_seed, obs_seed = int(rng.integers(2**31)), int(rng.integers(2**31))
        for ww in (
            W,
            np.concatenate(
                [W[:t_context], cube["weather"][loc, t1 + t_context : t1 + t_context + t_future]]
            ),
        ):
            V_f, _ = sim.run(
                state,
                ww[None, t_context:],
                d[t_context:],
                np.random.default_rng(fut_seed),
                locations=[loc],
            )
            tgt, tmask = sim.observe(V_f[0], np.random.default_rng(obs_seed))
            pair.append(
                {
                    "context": ctx,
                    "context_mask": cmask,
                    "target": tgt,
                    "target_mask": tmask,
                    "static": cube["static"][loc],
                    "weather": ww,
                    "doy": d,
                    "event": np.asarray(bool(ev)),
                    "location": np.asarray(loc),
                    "start": np.asarray(t0),
                }
            )
        A.append(pair[0])
        B.append(pair[1])
    return stack_windows(A), stack_windows(B)


def to_tensors(windows: dict[str, np.ndarray], decomposer: WeatherDecomposer | None = None) -> dict:
    """Float32 tensors of a window dict (plus the decomposition when given a decomposer).

    ``decomposer``: a fitted :class:`~eo_wm.weather.WeatherDecomposer`; adds ``baseline``,
    ``anomaly`` and ``stress``.
    """
    import torch

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
