"""The spec's bad inputs: each raises a clear error."""

import numpy as np
import pytest
import torch

from edit_ris import Capture, CaptureError, EditRIS, iou, miou, oiou

X = np.random.default_rng(0).random((1, 3, 32, 32)).astype(np.float32)


@pytest.mark.parametrize("expr", ["", "   "])
def test_empty_expression(tiny, expr):
    with pytest.raises(ValueError, match="empty or whitespace"):
        EditRIS(tiny).predict(X, [expr])


def test_template_without_ref(tiny):
    with pytest.raises(ValueError, match=r"\{ref\}"):
        EditRIS(tiny, template="make it red")


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"k_affinity": -1}, ValueError, r"k_affinity must be an int in \[0, inf\), got -1"),
        ({"k_affinity": 2.0}, TypeError, r"k_affinity must be an int, got 2\.0 of type float"),
        ({"n_bg_prototypes": 0}, ValueError, r"n_bg_prototypes must be an int in \[1, inf\)"),
        ({"n_refine": True}, TypeError, r"n_refine must be an int, got True .*bool"),
        ({"tau": 0.0}, ValueError, r"tau must be in \(0\.0, inf\), got 0\.0"),
        ({"tau": float("inf")}, ValueError, r"tau must be finite and in \(0\.0, inf\), got inf"),
        ({"lam": float("nan")}, ValueError, r"lam must be finite and in \[0\.0, 1\.0\], got nan"),
        ({"lam": 1.5}, ValueError, r"lam must be in \[0\.0, 1\.0\], got 1\.5"),
        ({"lam": "0.3"}, TypeError, r"lam must be a real number, got '0\.3' of type str"),
    ],
)
def test_bad_scalar_options(tiny, kwargs, err, match):
    with pytest.raises(err, match=match):
        EditRIS(tiny, **kwargs)


@pytest.mark.parametrize(
    ("images", "err", "match"),
    [
        (np.random.default_rng(0).random((1, 4, 32, 32)), ValueError, "RGB"),
        (np.random.default_rng(0).random((3, 32, 32)), ValueError, "shape"),
        ((X * 255).astype(np.uint8), TypeError, "floating point"),
        (X * 2.0, ValueError, r"\[0, 1\]"),
        (X[..., :30, :30], ValueError, "multiple of the backbone's downsampling factor 4; resize"),
    ],
)
def test_bad_images(tiny, images, err, match):
    with pytest.raises(err, match=match):
        EditRIS(tiny).predict(images, ["the red circle"] * len(images))


def test_length_mismatch(tiny):
    with pytest.raises(ValueError, match="len"):
        EditRIS(tiny).predict(np.repeat(X, 2, 0), ["the red circle"])


@pytest.mark.parametrize("t", [1000, -1, 1.5, 0.0, "latest"])
def test_timestep_not_in_schedule(tiny, t):
    with pytest.raises(ValueError, match="timestep"):
        EditRIS(tiny, timestep=t)


def test_absent_layers(tiny):
    with pytest.raises(ValueError, match="absent from layer_info"):
        EditRIS(tiny, layers={"cross_attn": ["down32"]})


def test_uncapturable_backbone(tiny):
    class Fused:
        """Delegates to the tiny editor but records no attention (a fused processor)."""

        def __getattr__(self, name):
            return getattr(tiny, name)

        def forward_capture(self, images, instructions, t, seed, capture=None):
            cap = tiny.forward_capture(images, instructions, t, seed, capture=None)
            return Capture(eps=cap.eps, x0=cap.x0)

    with pytest.raises(CaptureError, match="fused or compiled"):
        EditRIS(Fused()).predict(X, ["the red circle"])


def test_metric_inputs():
    with pytest.raises(ValueError, match="same shape"):
        iou(np.zeros((2, 4, 4), bool), np.zeros((2, 4, 5), bool))
    with pytest.raises(ValueError, match="binary"):
        miou(np.full((1, 4, 4), 0.5), np.zeros((1, 4, 4), bool))
    with pytest.raises(ValueError, match="binary"):
        oiou(torch.zeros(1, 2, 2), torch.full((1, 2, 2), 2.0))
