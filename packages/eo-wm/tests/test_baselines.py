import numpy as np
import pytest
import torch

from eo_wm import ConvLSTMForecaster, climatology_forecast, persistence_forecast
from eo_wm.baselines import predict_convlstm, train_convlstm


def test_persistence_takes_the_last_valid_pixel():
    ctx = np.arange(3.0)[:, None, None, None] * np.ones((3, 1, 1, 2))
    m = np.ones((3, 1, 1, 2))
    m[2, 0, 0, 1] = 0  # last frame cloudy at pixel 1
    out = persistence_forecast(ctx, m, 4)
    assert out.shape == (4, 1, 1, 2)
    np.testing.assert_array_equal(out[:, 0, 0], [[2.0, 1.0]] * 4)
    with pytest.raises(ValueError, match="0 or 1"):
        persistence_forecast(ctx, m * 2, 4)


def test_climatology_is_the_masked_mean_over_years():
    h = np.array([[[[0.2, 0.4]]], [[[0.4, 0.9]]]])  # (Y=2, T=1, 1, 2)
    mask = np.array([[[[1, 1]]], [[[1, 0]]]])
    np.testing.assert_allclose(climatology_forecast(h, mask), [[[0.3, 0.4]]])


def _data():
    n, tc, tf = 6, 2, 3
    data = {
        "context": torch.rand(n, tc, 4, 8, 8),
        "context_mask": torch.ones(n, tc, 1, 8, 8),
        "target": torch.rand(n, tf, 4, 8, 8),
        "target_mask": torch.ones(n, tf, 1, 8, 8),
        "static": torch.rand(n, 3, 8, 8),
        "weather": torch.randn(n, tc + tf, 3),
        "doy": torch.full((n, tc + tf), 100.0),
    }
    return data, tf


def test_convlstm_shapes_and_errors():
    torch.manual_seed(0)
    data, tf = _data()
    m = ConvLSTMForecaster(4, 3, 3, tf, hidden=4)
    assert predict_convlstm(m, data).shape == (6, tf, 4, 8, 8)
    with pytest.raises(ValueError, match="t_context \\+ t_future"):
        m(
            data["context"],
            data["context_mask"],
            data["static"],
            data["weather"][:, :-1],
            data["doy"],
        )


@pytest.mark.slow
def test_convlstm_training_runs():
    torch.manual_seed(0)
    data, tf = _data()
    m = ConvLSTMForecaster(4, 3, 3, tf, hidden=4)
    losses = train_convlstm(m, data, 3, batch_size=4, lr=1e-2, generator=torch.Generator())
    assert len(losses) == 3
    assert np.isfinite(losses).all()
