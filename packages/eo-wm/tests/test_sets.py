import numpy as np
import pytest

from eo_wm import LandSurfaceSimulator, WeatherDecomposer
from eo_wm.metrics import ndvi
from eo_wm.sets import make_dose_response


@pytest.fixture(scope="module")
def world():
    sim = LandSurfaceSimulator(6, 8, seed=3)
    cube = sim.simulate(3)
    dec = WeatherDecomposer().fit(
        cube["weather"].reshape(-1, 3),
        np.tile(cube["doy"], 6),
        variables=["temp", "precip", "rad"],
    )
    return sim, cube, dec


def test_dose_response_shares_context_and_scales_the_future_anomaly(world):
    sim, cube, dec = world
    sets = make_dose_response(sim, cube, dec, n_windows=3, seed=0, scales=(0.0, 1.0, 2.0))
    assert len(sets) == 3
    for w in sets[1:]:
        np.testing.assert_array_equal(w["context"], sets[0]["context"])
        np.testing.assert_array_equal(w["weather"][:, :8], sets[0]["weather"][:, :8])
        np.testing.assert_array_equal(w["target_mask"], sets[0]["target_mask"])
    base, _ = dec.climatology(sets[0]["doy"])
    # k = 0: the future is the climatology (precipitation clipped at 0 never binds there)
    np.testing.assert_allclose(sets[0]["weather"][:, 8:, 0], base[:, 8:, 0], atol=1e-9)
    hot = sets[2]["weather"][:, 8:, 0] - base[:, 8:, 0]
    real = sets[1]["weather"][:, 8:, 0] - base[:, 8:, 0]
    np.testing.assert_allclose(hot, 2 * real, atol=1e-9)
    assert (sets[2]["weather"][:, :, 1] >= 0).all()
    # the truth responds: a doubled anomaly lowers mean future NDVI versus a normal summer
    nd = [ndvi(w["target"]).mean() for w in sets]
    assert nd[2] < nd[0]


def test_dose_response_rejects_bad_arguments(world):
    sim, cube, dec = world
    with pytest.raises(ValueError, match="n_windows"):
        make_dose_response(sim, cube, dec, n_windows=0, seed=0)
    with pytest.raises(ValueError, match="scales"):
        make_dose_response(sim, cube, dec, n_windows=2, seed=0, scales=())
    calm = {**cube, "heatwave": np.zeros_like(cube["heatwave"])}
    calm["drought"] = np.zeros_like(cube["drought"])
    with pytest.raises(ValueError, match="no summer window"):
        make_dose_response(sim, calm, dec, n_windows=2, seed=0)
