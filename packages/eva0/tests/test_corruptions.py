import itertools

import numpy as np
import pytest

from eva0.corruptions import NAMES, SEVERITIES, corrupt


def _img():
    # a smooth ring (a "0"-like stroke) off the pixel grid, plus a little texture
    yy, xx = np.mgrid[0:16, 0:16]
    r = np.hypot(yy - 7.3, (xx - 8.1) * 1.4)
    ring = np.exp(-((r - 4.5) ** 2) / 2.0)
    g = np.random.default_rng(0)
    return np.clip(ring[None] * (0.8 + 0.2 * g.random((4, 16, 16))), 0, 1).astype(np.float32)


@pytest.mark.parametrize("name", NAMES)
def test_shape_dtype_range_determinism_monotone(name):
    x = _img()
    changes = []
    for s in range(1, 6):
        y = corrupt(x, name, s, np.random.default_rng(1))
        assert y.shape == x.shape
        assert y.dtype == x.dtype
        assert y.min() >= 0
        assert y.max() <= 1
        np.testing.assert_array_equal(y, corrupt(x, name, s, np.random.default_rng(1)))
        changes.append(float(np.abs(y - x).mean()))
    assert all(b >= a * 0.98 for a, b in itertools.pairwise(changes)), changes
    assert changes[-1] > changes[0]
    assert len(SEVERITIES[name]) == 5


def test_channels_layout():
    x = _img()[:, None]
    assert corrupt(x, "defocus_blur", 3, 0).shape == x.shape


def test_errors():
    with pytest.raises(ValueError, match="unknown corruption"):
        corrupt(_img(), "fog", 1)
    with pytest.raises(ValueError, match="severity"):
        corrupt(_img(), "contrast", 6)
    with pytest.raises(ValueError, match="shape"):
        corrupt(np.zeros(5), "contrast", 1)
