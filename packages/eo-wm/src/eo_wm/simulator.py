"""Offline land-surface simulator with a hidden soil-moisture state, and the benchmark sets.

Scenes of ``grid x grid`` pixels, 5-day steps (73 per year). Static fields: smooth elevation,
land cover (crop / grass / forest / bare) with their own heat and water sensitivities, maximum
greenness ``V_max`` and soil water capacity. Scene weather: temperature = climatology + AR(1)
anomaly + summer heatwaves, precipitation = climatology x Gamma(0.8) noise (suppressed in
droughts that co-occur with 60 % of heatwaves), radiation anti-correlated with precipitation.
Hidden soil moisture ``SM += P - ET`` and vegetation

``V += kappa (V_max phen(d) - V) - beta_h max(0, T - T_crit) V - beta_w max(0, 1 - SM/(0.4 cap)) V``

drive reflectances ``V rho_veg + (1 - V) rho_soil + noise``; 20 % of frames carry cloud blobs.

The windows and benchmark sets live in :mod:`eo_wm.sets` (re-exported here).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from eo_wm.sets import (
    WINDOW_KEYS,
    frame_ndvi,
    make_counterfactual_pairs,
    make_dataset,
    make_dose_response,
    make_extreme_summer,
    make_seasonal_pairs,
    stack_windows,
    summer_windows,
    to_tensors,
    window,
)

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


__all__ = [
    "BANDS",
    "RHO_SOIL",
    "RHO_VEG",
    "VARIABLES",
    "WINDOW_KEYS",
    "LandSurfaceSimulator",
    "SimState",
    "frame_ndvi",
    "make_counterfactual_pairs",
    "make_dataset",
    "make_dose_response",
    "make_extreme_summer",
    "make_seasonal_pairs",
    "stack_windows",
    "summer_windows",
    "to_tensors",
    "window",
]
