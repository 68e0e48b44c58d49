"""Baselines: shapes, Otsu, call counts, timestep resolution; the probe."""

import numpy as np
import pytest

from edit_ris import ShapeRefGenerator, separability_curve
from edit_ris import baselines as bl


def _items(n=2):
    items = ShapeRefGenerator(seed=0).sample(n, "attr", edit="purple")
    return np.stack([i.image for i in items]), [i.expression for i in items], items


def test_otsu_splits_a_bimodal_sample():
    v = np.concatenate([np.full(50, 0.1), np.full(30, 0.9)])
    t = bl.otsu_threshold(v)
    assert 0.1 <= t < 0.9
    assert ((v > t) == (v > 0.5)).all()


def test_center_prior_is_a_centred_disc():
    x, e, _ = _items()
    m = bl.CenterPrior().predict(x, e)
    assert m.shape == (2, 32, 32)
    assert m[0, 16, 16]
    assert not m[0, 0, 0]
    np.testing.assert_array_equal(m, m[:, ::-1, ::-1])


@pytest.mark.parametrize(
    "make",
    [
        lambda bb: bl.AttentionOnly(bb),
        lambda bb: bl.AttentionAffinity(bb),
        pytest.param(lambda bb: bl.FeatureOnly(bb), marks=pytest.mark.slow),  # sklearn import
        lambda bb: bl.OneStepDifference(bb),
        lambda bb: bl.NoiseDifference(bb, n_seeds=2),
        lambda bb: bl.EditDifference(bb, num_inference_steps=3),
    ],
)
def test_baselines_return_bool_masks(tiny, make):
    x, e, _ = _items()
    m = make(tiny).predict(x, e)
    assert m.shape == (2, 32, 32)
    assert m.dtype == bool


def test_noise_difference_with_n_seeds_set_to_zero_after_init_names_it(tiny):
    x, e, _ = _items()
    nd = bl.NoiseDifference(tiny, n_seeds=1)
    nd.n_seeds = 0  # was a ZeroDivisionError
    with pytest.raises(ValueError, match=r"n_seeds must be an int in \[1, inf\), got 0"):
        nd.predict(x, e)


def test_late_timestep_resolves_fractions(tiny):
    assert bl.LateTimestep(tiny, 0.5).resolved_timestep == 499
    assert bl.LateTimestep(tiny, 0.2).resolved_timestep == 199
    with pytest.raises(ValueError, match="fraction"):
        bl.LateTimestep(tiny, 2)


def test_edit_difference_costs_n_calls(tiny, monkeypatch):
    calls = []
    orig = type(tiny).denoise
    monkeypatch.setattr(
        type(tiny), "denoise", lambda s, *a, **k: calls.append(1) or orig(s, *a, **k)
    )
    x, e, _ = _items()
    bl.EditDifference(tiny, num_inference_steps=5).predict(x, e)
    assert len(calls) == 5


def test_separability_probe_columns(tiny):
    x, e, items = _items(3)
    gt = np.stack([i.mask for i in items])
    out = separability_curve(tiny, x, e, gt, [999, 499])
    assert out["timestep"] == [999, 999, 499, 499]
    assert all(0.0 <= a <= 1.0 for a in out["auroc"])
    with pytest.raises(ValueError, match="absent"):
        separability_curve(tiny, x, e, gt, [999], layers=["up32"])
