import numpy as np
import pytest
from scipy.stats import spearmanr

from eo_wm import metrics as M  # noqa: N812
from reference import crps_reference, dhr_reference


def _frames(r, nir):
    x = np.zeros((len(r), 4, 1, 2))
    x[:, 2], x[:, 3] = np.asarray(r)[:, None, None], np.asarray(nir)[:, None, None]
    return x


def test_ndvi_and_band_errors():
    x = _frames([0.1], [0.3])
    np.testing.assert_allclose(M.ndvi(x), 0.2 / (0.4 + 1e-8))
    with pytest.raises(ValueError, match="red and a NIR"):
        M.ndvi(x, bands=("B", "G", "R", "SWIR"))


def test_trajectory_uses_valid_vegetated_pixels_only():
    gt = np.array([[[0.5, 0.2], [0.6, 0.7]]])  # (T=1, 2, 2): pixel (0,1) not vegetated
    pred = np.array([[[0.4, 0.9], [0.8, 0.1]]])
    mask = np.array([[[[1, 1], [1, 0]]]])  # pixel (1,1) cloudy
    np.testing.assert_allclose(M.ndvi_trajectory(pred, gt, mask), [(0.4 + 0.8) / 2])
    with pytest.warns(RuntimeWarning):
        out = M.drop_amplitude_error(np.array([[np.nan]]), np.array([[np.nan]]), np.array([0.5]))
    assert np.isnan(out[0])


def test_drop_amplitude_error_hand_computed():
    gt = np.array([[0.6, 0.5, np.nan, 0.55]])
    pred = np.array([[0.62, 0.58, 0.1, 0.56]])  # the 0.1 sits on a frame with no GT: ignored
    b = np.array([0.65])
    np.testing.assert_allclose(M.gt_drop(gt, b), [0.15])
    np.testing.assert_allclose(M.drop_amplitude_error(pred, gt, b), [abs(0.65 - 0.56 - 0.15)])
    np.testing.assert_allclose(M.trough_ndvi_mae(pred, gt), [0.08])
    np.testing.assert_allclose(M.baseline_ndvi(np.array([[0.1, 0.4, np.nan, 0.5, 0.6]])), [0.5])


def test_severity_bins_use_percentiles():
    d = np.arange(1.0, 10.0)
    lo, hi = np.percentile(d, [33.3333333, 66.6666667])
    want = np.where(d <= lo, 0, np.where(d <= hi, 1, 2))
    np.testing.assert_array_equal(M.severity_bins(d), want)
    assert M.severity_bins(d).tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_severity_bins_accept_empty_and_nan_selections():
    assert M.severity_bins(np.array([])).shape == (0,)
    with pytest.warns(RuntimeWarning, match="no finite drop"):
        assert M.severity_bins(np.array([np.nan, np.nan])).tolist() == [-1, -1]
    # a NaN drop is never put in the "high" bin
    assert M.severity_bins(np.array([0.1, np.nan, 0.2, 0.3])).tolist() == [0, -1, 1, 2]


def test_pair_metrics_hand_computed_and_pooled():
    ga = np.array([[0.50, 0.50, 0.50], [0.5, 0.5, 0.5]])
    gb = np.array([[0.40, 0.51, 0.60], [0.45, 0.44, 0.43]])  # diffs .1, -.01, -.1 | .05 .06 .07
    pa = np.array([[0.45, 0.0, 0.40], [0.5, 0.5, 0.5]])
    pb = np.array([[0.40, 0.0, 0.45], [0.49, 0.52, 0.48]])  # .05, 0, -.05 | .01 -.02 .02
    # kept: pair 0 steps 0, 2 (2 hits); pair 1 all three (2 hits): pooled 4/5, not mean(1, 2/3)
    assert M.directional_hit_rate(pa, pb, ga, gb) == pytest.approx(0.8)
    assert M.directional_hit_rate(pa, pb, ga, gb) == pytest.approx(dhr_reference(pa, pb, ga, gb))
    drr = np.mean([0.05, 0.05, 0.01, 0.02, 0.02]) / np.mean([0.1, 0.1, 0.05, 0.06, 0.07])
    assert M.divergence_reproduction_ratio(pa, pb, ga, gb) == pytest.approx(drr)
    with pytest.raises(ValueError, match="one shape"):
        M.directional_hit_rate(pa[:, :2], pb, ga, gb)
    with pytest.warns(RuntimeWarning, match="threshold"):
        assert np.isnan(M.directional_hit_rate(pa, pb, ga, ga))


def test_pdc_is_spearman_over_pairs():
    rng = np.random.default_rng(0)
    pa, pb, ga, gb = rng.uniform(size=(4, 10, 6))
    tp = np.abs(pa - pb).sum(1)
    tg = np.abs(ga - gb).sum(1)
    want = spearmanr(tp, tg).statistic
    assert M.paired_divergence_correlation(pa, pb, ga, gb) == pytest.approx(want)


def test_crps_and_spread_skill():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(5, 7)), rng.normal(size=7)
    want = [crps_reference(list(x[:, j]), y[j]) for j in range(7)]
    np.testing.assert_allclose(M.crps_ensemble(x, y), want)
    np.testing.assert_allclose(M.crps_ensemble(x[:1], y), np.abs(x[0] - y))
    # calibrated ensemble: members and truth from one distribution -> ratio near 1
    z = rng.normal(size=(9, 20000))
    assert M.spread_skill(z[1:], z[0]) == pytest.approx(1.0, abs=0.03)


def test_standard_metrics_and_empty_masks():
    p, t = np.full((1, 2, 4, 2, 2), 0.2), np.full((1, 2, 4, 2, 2), 0.3)
    m = np.ones((1, 2, 1, 2, 2))
    m[0, 1] = 0
    assert M.pixel_mae(p, t, m) == pytest.approx(0.1)
    with pytest.warns(RuntimeWarning):
        assert np.isnan(M.pixel_mae(p, t, np.zeros_like(m)))
    t[:, :, 3] = 0.8
    p[:, :, 3] = 0.7
    want = abs((0.7 - 0.2) / (0.9 + 1e-8) - (0.8 - 0.3) / (1.1 + 1e-8))
    assert M.ndvi_mae(p, t, m) == pytest.approx(want)
