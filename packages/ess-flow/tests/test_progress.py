"""Progress bars: shown when asked (progress=True), silent by default under TQDM_DISABLE."""

import io
import sys
import warnings

import torch

from ess_flow import ESSFlow, MLPVelocity, pcn_sample, train_flow_matching


def _log_lik(x):
    return -0.5 * ((x - 1.0) ** 2).sum(-1)


def _calls(progress):
    """The three long calls on tiny problems; returns what they compute."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a 20-iteration run mixes poorly; that is not tested
        res = ESSFlow(lambda z: z, _log_lik, (2,)).run(4, 20, seed=0, progress=progress)
    pcn = pcn_sample(lambda z: z, _log_lik, (2,), 4, 20, beta=0.5, seed=0, progress=progress)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = MLPVelocity(2, hidden=8)
    data = torch.randn(32, 2, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1)
    losses = train_flow_matching(model, data, n_steps=5, batch_size=8, generator=g,
                                 progress=progress)  # fmt: skip
    return res.z, pcn.z, torch.tensor(losses)


def _stderr(monkeypatch) -> io.StringIO:
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    return buf


def test_bars_when_asked(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    quiet = _calls(False)
    buf = _stderr(monkeypatch)
    shown = _calls(True)
    for desc in ("ESS-Flow", "pCN", "flow matching"):
        assert desc in buf.getvalue()
    assert "20/20" in buf.getvalue()
    for a, b in zip(shown, quiet, strict=True):
        torch.testing.assert_close(a, b)  # the bar changes nothing


def test_default_is_silent_under_tqdm_disable(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    buf = _stderr(monkeypatch)
    _calls(None)
    _calls(True)
    assert buf.getvalue() == ""
