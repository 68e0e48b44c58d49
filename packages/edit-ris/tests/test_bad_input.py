"""Issue 41: every bad input gives a ValueError/TypeError that names the argument.

Also the seeded TinyEditor (no global seeding, issue 50) and train_tiny_editor's progress bar.
"""

import io
import sys

import numpy as np
import pytest
import torch

from edit_ris import (
    EditRIS,
    ShapeRefGenerator,
    TinyEditor,
    baselines,
    iou,
    miou,
    precision_at,
    separability_curve,
    train_tiny_editor,
)
from edit_ris.data.shapes import vocabulary

X = np.random.default_rng(0).random((1, 3, 32, 32)).astype(np.float32)
E = ["the red circle"]
M = np.zeros((1, 32, 32), bool)


def _with(value, index=(0, 0, 3, 3)):
    x = X.copy()
    x[index] = value
    return x


@pytest.mark.parametrize(
    ("images", "match"),
    [
        (_with(np.nan), r"images contain 1 NaN or infinite"),
        (_with(np.inf), r"images contain 1 NaN or infinite"),
        (torch.from_numpy(_with(np.nan)), r"images contain 1 NaN or infinite"),
        (X[:0], r"images is an empty batch"),
        (np.zeros((1, 3, 0, 0), np.float32), r"images have zero height or width"),
    ],
)
def test_predict_rejects_nan_and_empty_images(tiny, images, match):
    n = len(images)
    with pytest.raises(ValueError, match=match):
        EditRIS(tiny).predict(images, E * n)


def test_predict_rejects_empty_list(tiny):
    with pytest.raises(ValueError, match="images is an empty list"):
        EditRIS(tiny).predict([], [])


def test_one_nan_pixel_is_not_hidden_by_the_range_check(tiny):
    # NaN compares False with both bounds: the finiteness check must come first
    with pytest.raises(ValueError, match="NaN"):
        EditRIS(tiny).predict(_with(np.nan, (0, 2, 31, 31)), E)


@pytest.mark.parametrize(
    ("seed", "err", "match"),
    [
        (1.5, TypeError, "seed must be an int"),
        (-1, ValueError, r"seed must be an int in \[0, inf\), got -1"),
    ],
)
def test_editris_seed(tiny, seed, err, match):
    with pytest.raises(err, match=match):
        EditRIS(tiny, seed=seed)


def test_metrics_bad_masks():
    with pytest.raises(ValueError, match="pred and gt are empty"):
        miou(M[:0], M[:0])
    with pytest.raises(ValueError, match=r"shape \(H, W\) or \(B, H, W\)"):
        iou(np.zeros(4, bool), np.zeros(4, bool))
    with pytest.raises(ValueError, match="binary"):
        iou(np.full((1, 4, 4), np.nan), np.zeros((1, 4, 4), bool))


@pytest.mark.parametrize(
    ("t", "match"),
    [
        (1.5, r"thresholds must be in \[0\.0, 1\.0\], got 1\.5"),
        (float("nan"), r"thresholds must be finite and in \[0\.0, 1\.0\], got nan"),
        (-0.1, r"thresholds must be in \[0\.0, 1\.0\], got -0\.1"),
    ],
)
def test_precision_at_thresholds(t, match):
    with pytest.raises(ValueError, match=match):
        precision_at(M, M, thresholds=(t,))


GEN = ShapeRefGenerator(seed=0)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"steps": 0}, ValueError, r"steps must be an int in \[1, inf\), got 0"),
        ({"steps": -1}, ValueError, r"steps must be an int in \[1, inf\), got -1"),
        ({"steps": 2.0}, TypeError, "steps must be an int, got 2.0 of type float"),
        ({"batch_size": 0}, ValueError, r"batch_size must be an int in \[1, inf\), got 0"),
        ({"lr": -1.0}, ValueError, r"lr must be in \(0\.0, inf\), got -1\.0"),
        ({"lr": float("nan")}, ValueError, r"lr must be finite and in \(0\.0, inf\), got nan"),
        ({"minutes": float("nan")}, ValueError, "minutes must be finite and in"),
        ({"minutes": 0}, ValueError, r"minutes must be in \(0\.0, inf\), got 0"),
        ({"seed": -3}, ValueError, r"seed must be an int in \[0, inf\), got -3"),
        ({"model": "tiny"}, TypeError, "model must be a TinyEditor"),
    ],
)
def test_train_tiny_editor_bad_config(kwargs, err, match):
    with pytest.raises(err, match=match):
        train_tiny_editor(GEN, **{"steps": 1, "batch_size": 2, **kwargs})


def test_train_tiny_editor_bad_dataset():
    with pytest.raises(TypeError, match=r"dataset must have a sample\(n, split=, edit=\)"):
        train_tiny_editor([1, 2], steps=1, batch_size=2)


@pytest.mark.parametrize(
    ("noise", "err"), [(-1.0, ValueError), (float("nan"), ValueError), ("0.1", TypeError)]
)
def test_generator_noise(noise, err):
    with pytest.raises(err, match="noise must be a"):
        ShapeRefGenerator(noise=noise)


@pytest.mark.parametrize(
    ("masks", "timesteps", "err", "match"),
    [
        (np.full((1, 32, 32), np.nan), [999], ValueError, "masks must be binary"),
        (M, [], ValueError, "timesteps is empty"),
        (M, [5000], ValueError, r"timestep 5000 is not in the schedule \[0, 1000\)"),
        (M, [-1], ValueError, "timestep -1 is not in the schedule"),
        (M, [0.5], TypeError, "timesteps must be ints"),
    ],
)
def test_separability_bad_input(tiny, masks, timesteps, err, match):
    with pytest.raises(err, match=match):
        separability_curve(tiny, X, E, masks, timesteps)


@pytest.mark.parametrize(
    ("make", "err", "match"),
    [
        (lambda bb: baselines.CenterPrior(threshold=float("nan")), ValueError, "threshold"),
        (lambda bb: baselines.CenterPrior(sigma=float("inf")), ValueError, "sigma"),
        (lambda bb: baselines.NoiseDifference(bb, n_seeds=0), ValueError, "n_seeds"),
        (lambda bb: baselines.NoiseDifference(bb, fraction=2.0), ValueError, "fraction"),
        (lambda bb: baselines.FeatureOnly(bb, n_clusters=0), ValueError, "n_clusters"),
        (lambda bb: baselines.OneStepDifference(bb, smooth=-1.0), ValueError, "smooth"),
        (lambda bb: baselines.OneStepDifference(bb, seed=0.5), TypeError, "seed"),
        (lambda bb: baselines.EditDifference(bb, num_inference_steps=0), ValueError, "num_inf"),
    ],
)
def test_baseline_config(tiny, make, err, match):
    with pytest.raises(err, match=match):
        make(tiny)


def test_one_step_difference_timestep_out_of_schedule(tiny):
    with pytest.raises(ValueError, match=r"timestep 5000 is not in the schedule"):
        baselines.OneStepDifference(tiny).predict(X, E, timestep=5000)


@pytest.mark.parametrize(
    ("values", "match"), [(np.array([0.1, np.nan]), "NaN or infinite"), (np.array([]), "empty")]
)
def test_otsu_bad_values(values, match):
    with pytest.raises(ValueError, match=match):
        baselines.otsu_threshold(values)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"channels": (30, 60)}, ValueError, "channels must be two positive multiples of 8"),
        ({"channels": (32,)}, ValueError, "channels must be two"),
        ({"max_length": 1}, ValueError, r"max_length must be an int in \[2, inf\), got 1"),
        ({"text_dim": 0}, ValueError, r"text_dim must be an int in \[1, inf\), got 0"),
        ({"num_inference_steps": 2000}, ValueError, "num_inference_steps must be <= "),
        ({"seed": "0"}, TypeError, "seed must be an int"),
    ],
)
def test_tiny_editor_config(kwargs, err, match):
    with pytest.raises(err, match=match):
        TinyEditor(vocabulary(), **kwargs)


# -- issue 50: seeded, without touching the global RNG -------------------------------------


def test_seeded_tiny_editor_matches_global_seeding_and_leaves_global_rng_alone():
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(7)
        reference = TinyEditor(vocabulary()).state_dict()
        torch.manual_seed(123)
        before = torch.random.get_rng_state()
        seeded = TinyEditor(vocabulary(), seed=7).state_dict()
        assert torch.equal(torch.random.get_rng_state(), before)  # global RNG untouched
    finally:
        torch.random.set_rng_state(state)
    assert reference.keys() == seeded.keys()
    for k in reference:
        assert torch.equal(reference[k], seeded[k]), k  # bit for bit


def test_train_tiny_editor_is_deterministic_and_never_seeds_globally():
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(123)
        before = torch.random.get_rng_state()
        a, _ = train_tiny_editor(ShapeRefGenerator(seed=1), seed=5, steps=2, batch_size=2)
        assert torch.equal(torch.random.get_rng_state(), before)
        torch.manual_seed(999)  # another global state: same result
        b, _ = train_tiny_editor(ShapeRefGenerator(seed=1), seed=5, steps=2, batch_size=2)
    finally:
        torch.random.set_rng_state(state)
    for k, v in a.state_dict().items():
        assert torch.equal(v, b.state_dict()[k]), k


# -- progress ----------------------------------------------------------------------------


def test_train_tiny_editor_progress(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    train_tiny_editor(ShapeRefGenerator(seed=1), steps=2, batch_size=2, progress=True)
    assert "TinyEditor training" in buf.getvalue()
    assert "2/2" in buf.getvalue()


def test_train_tiny_editor_silent_under_tqdm_disable(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    train_tiny_editor(ShapeRefGenerator(seed=1), steps=1, batch_size=2)
    train_tiny_editor(ShapeRefGenerator(seed=1), steps=1, batch_size=2, progress=True)
    assert buf.getvalue() == ""
