import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

from eo_wm import WeatherDecomposer, cumulative_stress
from reference import harmonic_baseline_reference, stress_reference


def _weather(n_years=4, seed=0):
    rng = np.random.default_rng(seed)
    doy = np.tile(1 + np.arange(73) * 5.0, n_years)
    temp = (
        11
        + 10 * np.sin(2 * np.pi * (doy - 105) / 365)
        + rng.normal(0, 1.5, doy.size) * (1 + 0.5 * np.cos(2 * np.pi * doy / 365))
    )
    precip = 12 * rng.gamma(0.8, 1 / 0.8, doy.size)
    return np.stack([temp, precip], 1), doy


def test_inverse_transform_reconstructs_exactly():
    W, doy = _weather()
    dec = WeatherDecomposer().fit(W, doy, variables=["temp", "precip"])
    parts = dec.transform(W[:40].reshape(2, 20, 2), doy[:40].reshape(2, 20))
    back = dec.inverse_transform(parts, doy[:40].reshape(2, 20))
    np.testing.assert_allclose(back, W[:40].reshape(2, 20, 2), atol=1e-6)


def test_baseline_is_the_least_squares_harmonic_fit():
    W, doy = _weather()
    dec = WeatherDecomposer(n_harmonics=3).fit(W, doy)
    ref = harmonic_baseline_reference(W, doy, 3)
    np.testing.assert_allclose(dec.transform(W, doy)["baseline"], ref, atol=1e-8)


def test_anomalies_have_zero_mean_and_unit_variance_per_season():
    W, doy = _weather(n_years=30, seed=1)
    A = WeatherDecomposer().fit(W, doy, variables=["temp", "precip"]).transform(W, doy)["anomaly"]
    season = ((doy - 1) // 91.5).astype(int)
    for s in range(4):
        a = A[season == s, 0]
        se = 1 / np.sqrt(a.size)
        assert abs(a.mean()) < 4 * se
        assert abs(a.var() - 1) < 0.15


def test_stress_matches_reference_and_is_causal():
    rng = np.random.default_rng(2)
    a = rng.normal(size=(30, 2))
    S = cumulative_stress(a, decays=(0.7, 0.9), threshold=0.5)
    for j in range(2):
        for k, lam in enumerate((0.7, 0.9)):
            np.testing.assert_allclose(S[:, 2 * j + k], stress_reference(a[:, j], lam, 0.5))
    b = a.copy()
    b[20:] += 5.0
    np.testing.assert_array_equal(cumulative_stress(b, (0.7, 0.9), 0.5)[:20], S[:20])


def test_stress_grows_above_threshold_and_decays_below():
    a = np.array([0.0, 2.0, 2.0, 3.0, -1.0, -1.0])[:, None]
    S = cumulative_stress(a, decays=(0.8,), threshold=1.0)[:, 0]
    assert np.all(np.diff(S[:4]) >= 0)
    np.testing.assert_allclose(S[4:], [0.8 * S[3], 0.64 * S[3]])


def test_dry_stress_follows_the_precipitation_deficit():
    W, doy = _weather()
    dec = WeatherDecomposer(stress_decays=(0.9,)).fit(W, doy, variables=["temp", "precip"])
    parts = dec.transform(W[:20], doy[:20])
    A = parts["anomaly"]
    np.testing.assert_allclose(parts["stress"][:, 1], stress_reference(-A[:, 1], 0.9, 0.0))
    assert dec.n_stress == 2


def test_groups_fit_one_climatology_each():
    W, doy = _weather()
    W2 = np.concatenate([W, W + 5.0])
    g = np.repeat([0, 1], len(W))
    dec = WeatherDecomposer(group_key="loc").fit(W2, np.tile(doy, 2), groups=g)
    B = dec.transform(np.stack([W[:10], W[:10] + 5]), np.stack([doy[:10]] * 2), groups=[0, 1])
    np.testing.assert_allclose(B["baseline"][1] - B["baseline"][0], 5.0, atol=1e-8)
    with pytest.raises(KeyError, match="not seen"):
        dec.transform(W[None, :10], doy[None, :10], groups=[7])


def test_bad_inputs():
    W, doy = _weather()
    with pytest.raises(NotFittedError, match="fit"):
        WeatherDecomposer().transform(W, doy)
    dec = WeatherDecomposer().fit(W, doy)
    with pytest.raises(ValueError, match=r"\[1, 366\]"):
        dec.transform(W[:5], np.array([0.0, 5, 10, 15, 20]))
    with pytest.raises(ValueError, match=r"\[1, 366\]"):
        WeatherDecomposer().fit(W, doy + 400)
    with pytest.raises(ValueError, match=r"doy\.shape"):
        dec.transform(W[:5], doy[:4])
    with pytest.raises(ValueError, match="decays"):
        cumulative_stress(np.zeros((3, 1)), decays=(1.2,))


def test_nan_or_empty_forcing_is_refused():
    W, doy = _weather()
    W_nan = W.copy()
    W_nan[3, 0] = np.nan
    with pytest.raises(ValueError, match="W has 1 NaN or infinite"):
        WeatherDecomposer().fit(W_nan, doy)
    dec = WeatherDecomposer().fit(W, doy)
    with pytest.raises(ValueError, match="W has 1 NaN or infinite"):
        dec.transform(W_nan, doy)
    with pytest.raises(ValueError, match="W is empty"):
        WeatherDecomposer().fit(np.zeros((0, 2)), np.zeros(0))


def test_a_dataframe_keeps_its_column_names_and_default_stresses():
    pd = pytest.importorskip("pandas")
    W, doy = _weather()
    frame = pd.DataFrame(W, columns=["temp", "precip"])
    dec = WeatherDecomposer().fit(frame, doy)
    assert dec.variables_ == ["temp", "precip"]
    assert [name for name, _ in dec.stress_index_] == ["heat", "dry"]
    assert dec.transform(frame.to_numpy(), doy)["stress"].shape[-1] > 0
