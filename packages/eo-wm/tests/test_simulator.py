import numpy as np

from eo_wm import LandSurfaceSimulator, make_counterfactual_pairs, make_extreme_summer
from eo_wm.metrics import ndvi
from eo_wm.simulator import RHO_SOIL, RHO_VEG, SimState, summer_windows


def _ndvi_of(V):
    r = V * RHO_VEG[2] + (1 - V) * RHO_SOIL[2]
    n = V * RHO_VEG[3] + (1 - V) * RHO_SOIL[3]
    return ((n - r) / (n + r)).mean((-1, -2))


def test_determinism_by_seed():
    a = LandSurfaceSimulator(3, 8, seed=4).simulate(1)
    b = LandSurfaceSimulator(3, 8, seed=4).simulate(1)
    c = LandSurfaceSimulator(3, 8, seed=5).simulate(1)
    np.testing.assert_array_equal(a["frames"], b["frames"])
    assert not np.array_equal(a["frames"], c["frames"])


def test_heatwave_and_drought_lower_ndvi_then_it_recovers():
    sim = LandSurfaceSimulator(4, 8, seed=0)
    met = sim.weather(1, np.random.default_rng(0))
    W, d = met["weather"].copy(), met["doy"]
    W[:, :, 0] -= 7.0 * met["heatwave"]  # damp the simulated events
    W[:, :, 1] = np.where(met["drought"], 12.0, W[:, :, 1])
    hot = W.copy()
    hot[:, 36:42, 0] += 7.0
    hot[:, 34:42, 1] *= 0.08
    st = sim.initial_state()
    V0, _ = sim.run(st, W, d, np.random.default_rng(1))
    V1, _ = sim.run(st, hot, d, np.random.default_rng(1))
    n0, n1 = _ndvi_of(V0), _ndvi_of(V1)
    assert np.all(n1[:, :34] == n0[:, :34])
    gap = n0 - n1
    assert gap[:, 42].mean() > 0.03
    assert gap[:, 60].mean() < 0.5 * gap[:, 42].mean()


def test_hidden_soil_moisture_changes_the_future():
    sim = LandSurfaceSimulator(2, 8, seed=1)
    met = sim.weather(1, np.random.default_rng(0))
    W, d = met["weather"][:, 30:45].copy(), met["doy"][30:45]
    W[:, :, 1] *= 0.3  # a dry spell, identical for both runs
    st = sim.initial_state(d[0])
    wet = SimState(st.V, sim.capacity.copy())
    dry = SimState(st.V, 0.05 * sim.capacity)
    Vw, _ = sim.run(wet, W, d, np.random.default_rng(2))
    Vd, _ = sim.run(dry, W, d, np.random.default_rng(2))
    gap = (_ndvi_of(Vw) - _ndvi_of(Vd)).mean(0)
    assert gap.max() > 0.02
    assert np.all(gap > 0)


def test_benchmark_sets():
    sim = LandSurfaceSimulator(6, 8, seed=2)
    cube = sim.simulate(3)
    w = summer_windows(cube)
    assert w["target"].shape == (6 * 3 * 3, 12, 4, 8, 8)
    ext = make_extreme_summer(w)
    assert np.all(w["event"][ext])
    a, b = make_counterfactual_pairs(sim, cube, 3, seed=0)
    np.testing.assert_array_equal(a["context"], b["context"])
    np.testing.assert_array_equal(a["weather"][:, :8], b["weather"][:, :8])
    assert np.isfinite(ndvi(a["target"])).all()
