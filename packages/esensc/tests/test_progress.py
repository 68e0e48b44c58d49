"""Progress bars: shown when asked (progress=True), silent by default under TQDM_DISABLE."""

import io
import sys

import numpy as np

from esensc import ESENSCExplainer, exact_shapley

W = np.array([1.0, 2.0, -1.0])


def _model(Z):
    return Z @ W


def _stderr(monkeypatch) -> io.StringIO:
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    return buf


def test_explainer_and_exact_show_a_bar_when_asked(monkeypatch):
    bg, X = np.zeros((4, 3)), np.ones((5, 3))
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    buf = _stderr(monkeypatch)
    ex = ESENSCExplainer(_model, bg, batch_size=8)
    phi = ex.attribute(X, progress=True)
    assert "coalitions" in buf.getvalue()
    np.testing.assert_allclose(phi, np.broadcast_to(W, (5, 3)))  # the bar changes nothing
    buf = _stderr(monkeypatch)
    exact_shapley(_model, bg, X, progress=True)
    ex(X, progress=True)
    assert buf.getvalue().count("coalitions") >= 2


def test_default_is_silent_under_tqdm_disable(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    buf = _stderr(monkeypatch)
    ex = ESENSCExplainer(_model, np.zeros((4, 3)), batch_size=8)
    ex.attribute(np.ones((5, 3)))
    ex.attribute(np.ones((5, 3)), progress=True)
    exact_shapley(_model, np.zeros((4, 3)), np.ones((5, 3)))
    assert buf.getvalue() == ""
