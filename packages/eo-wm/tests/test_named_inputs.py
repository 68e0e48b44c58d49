"""DataFrame and xarray Dataset inputs keep their variable names; missing ones are named."""

import sys

import numpy as np
import pytest

from eo_wm import WeatherDecomposer


def _weather(n_years=3, seed=0):
    rng = np.random.default_rng(seed)
    doy = np.tile(1 + np.arange(73) * 5.0, n_years)
    temp = 11 + 10 * np.sin(2 * np.pi * (doy - 105) / 365) + rng.normal(0, 1.5, doy.size)
    precip = 12 * rng.gamma(0.8, 1 / 0.8, doy.size)
    rad = 200 + 80 * np.sin(2 * np.pi * (doy - 80) / 365) + rng.normal(0, 10, doy.size)
    return {"temp": temp, "precip": precip, "rad": rad}, doy


def test_a_dataframe_is_read_by_name_in_the_fitted_order():
    pd = pytest.importorskip("pandas")
    cols, doy = _weather()
    frame = pd.DataFrame(cols)
    dec = WeatherDecomposer().fit(frame, doy)
    assert dec.variables_ == ["temp", "precip", "rad"]
    want = dec.transform(frame.to_numpy(), doy)
    got = dec.transform(frame[["rad", "temp", "precip"]], doy)  # other column order
    np.testing.assert_array_equal(got["anomaly"], want["anomaly"])
    with pytest.raises(ValueError, match=r"W lacks the variable\(s\) \['precip'\]"):
        dec.transform(frame[["temp", "rad"]], doy)
    sub = WeatherDecomposer().fit(frame, doy, variables=["temp", "rad"])
    assert sub.variables_ == ["temp", "rad"]
    assert sub.n_features_in_ == 2
    with pytest.raises(ValueError, match=r"W lacks the variable\(s\) \['wind'\]"):
        WeatherDecomposer().fit(frame, doy, variables=["temp", "wind"])


def test_an_xarray_dataset_keeps_its_variable_names():
    xr = pytest.importorskip("xarray")
    cols, doy = _weather()
    ds = xr.Dataset({k: ("time", v) for k, v in cols.items()})
    dec = WeatherDecomposer().fit(ds, doy)
    assert dec.variables_ == ["temp", "precip", "rad"]
    assert [name for name, _ in dec.stress_index_] == ["heat", "dry"]
    ref = WeatherDecomposer().fit(np.stack(list(cols.values()), 1), doy, variables=list(cols))
    np.testing.assert_allclose(
        dec.transform(ds, doy)["anomaly"], ref.transform(ds, doy)["anomaly"], rtol=1e-12
    )
    with pytest.raises(ValueError, match=r"W lacks the variable\(s\) \['rad'\]"):
        dec.transform(ds[["temp", "precip"]], doy)
    with pytest.raises(ValueError, match=r"lacks the variable\(s\) \['wind'\].*'temp'"):
        WeatherDecomposer().fit(ds, doy, variables=["temp", "wind"])
    bad = ds.assign(rad=("other", np.zeros(5)))
    with pytest.raises(ValueError, match="must share one shape"):
        WeatherDecomposer().fit(bad, doy)


def test_transform_dataset_returns_named_parts_on_the_input_coordinates():
    xr = pytest.importorskip("xarray")
    pd = pytest.importorskip("pandas")
    cols, doy = _weather()
    dec = WeatherDecomposer().fit(xr.Dataset({k: ("t", v) for k, v in cols.items()}), doy)
    time = pd.date_range("2021-05-01", periods=20, freq="5D")
    ds = xr.Dataset(
        {k: (("window", "time"), np.stack([v[:20], v[20:40]])) for k, v in cols.items()},
        coords={"time": time, "window": ["a", "b"]},
    )
    out = dec.transform_dataset(ds)
    assert list(out["variable"].values) == ["temp", "precip", "rad"]
    stress = ["heat_lam0.7", "heat_lam0.9", "dry_lam0.7", "dry_lam0.9"]
    assert list(out["stress_channel"].values) == stress
    assert out["anomaly"].dims == ("window", "time", "variable")
    assert list(out["window"].values) == ["a", "b"]
    day = np.broadcast_to(time.dayofyear.to_numpy(), (2, 20))
    W = np.stack([ds[k].values for k in ("temp", "precip", "rad")], -1)
    want = dec.transform(W, day)
    np.testing.assert_allclose(out["anomaly"].values, want["anomaly"])
    np.testing.assert_allclose(out["stress"].values, want["stress"])
    np.testing.assert_allclose(dec.transform_dataset(ds, doy=day)["baseline"], want["baseline"])
    with pytest.raises(ValueError, match="no datetime 'time' coordinate"):
        dec.transform_dataset(ds.drop_vars("time"))
    with pytest.raises(TypeError, match=r"ds must be an xarray\.Dataset, got ndarray"):
        dec.transform_dataset(W, doy=day)
    with pytest.raises(ValueError, match=r"ds lacks the variable\(s\) \['rad'\]"):
        dec.transform_dataset(ds[["temp", "precip"]])


def test_transform_dataset_without_xarray_names_the_extra(monkeypatch):
    cols, doy = _weather()
    dec = WeatherDecomposer().fit(np.stack(list(cols.values()), 1), doy)
    monkeypatch.setitem(sys.modules, "xarray", None)  # `import xarray` now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'eo-wm\[xarray\]'"):
        dec.transform_dataset(object())
