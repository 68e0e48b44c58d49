"""EchoRNNClassifier/Regressor: clear errors on bad input, progress bar over the epochs."""

import io
import sys

import numpy as np
import pytest

from hel import EchoRNNClassifier, EchoRNNRegressor

RNG = np.random.default_rng(0)
X = RNG.normal(size=(12, 2, 10))
Y = np.array([0, 1] * 6)


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"hidden_size": 0}, ValueError, "hidden_size must be an integer >= 1, got 0"),
        ({"hidden_size": 2.5}, TypeError, "hidden_size must be an integer >= 1"),
        ({"dt": 0.0}, ValueError, "dt must be a finite number > 0"),
        ({"dt": float("nan")}, ValueError, "dt must be a finite number > 0, got nan"),
        ({"lr": 0.0}, ValueError, "lr must be a finite number > 0"),
        ({"lr": float("inf")}, ValueError, "lr must be a finite number > 0, got inf"),
        ({"lr": "big"}, TypeError, "lr must be a finite number > 0, got 'big'"),
        ({"batch_size": 0}, ValueError, "batch_size must be an integer >= 1"),
        ({"batch_size": 2.5}, TypeError, "batch_size must be an integer >= 1"),
        ({"epochs": 0}, ValueError, "epochs must be an integer >= 1"),
        ({"epochs": True}, TypeError, "epochs must be an integer >= 1"),
        ({"estimator": "adam"}, ValueError, "estimator must be one of"),
        ({"random_state": "x"}, TypeError, "random_state must be None or an integer"),
        ({"progress": "yes"}, TypeError, "progress must be None, True or False"),
        ({"device": "tpu9"}, ValueError, "device must be a torch device"),
    ],
)
@pytest.mark.parametrize("cls", [EchoRNNClassifier, EchoRNNRegressor])
def test_bad_parameters_raise_naming_the_argument(cls, params, error, match):
    kw = {"epochs": 1, "hidden_size": 4, **params}
    y = Y if cls is EchoRNNClassifier else Y.astype(float)
    with pytest.raises(error, match=match):
        cls(**kw).fit(X, y)


def _with(value):
    Xb = X.copy()
    Xb[1, 0, 3] = value
    return Xb


@pytest.mark.parametrize(
    ("Xb", "yb", "match"),
    [
        (_with(np.nan), Y, "NaN"),
        (_with(np.inf), Y, "infinity"),
        (X[..., None], Y, "numpy3D"),
        (X[:0], Y[:0], "0 sample"),
        (X, Y[:5], "inconsistent numbers of samples"),
        (X[:, :, :0], Y, "0 feature|time steps|T = 0"),
    ],
)
def test_bad_data_raise_clear_errors(Xb, yb, match):
    with pytest.raises(ValueError, match=match):
        EchoRNNClassifier(epochs=1, hidden_size=4).fit(Xb, yb)


def test_single_class_raises():
    with pytest.raises(ValueError, match="only 1 class"):
        EchoRNNClassifier(epochs=1, hidden_size=4).fit(X, np.zeros(12))


def test_predict_with_other_channels_raises():
    clf = EchoRNNClassifier(epochs=1, hidden_size=4, random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :1])


def test_progress_bar_over_epochs(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    EchoRNNClassifier(epochs=3, hidden_size=4, random_state=0, progress=True).fit(X, Y)
    assert "EchoRNNClassifier (hel)" in err.getvalue()
    assert "3/3" in err.getvalue()
    monkeypatch.setenv("TQDM_DISABLE", "1")
    quiet = io.StringIO()
    monkeypatch.setattr(sys, "stderr", quiet)
    EchoRNNClassifier(epochs=2, hidden_size=4, random_state=0).fit(X, Y)
    assert quiet.getvalue() == ""
