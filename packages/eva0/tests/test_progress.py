"""Progress bars: shown when asked (progress=True), silent by default under TQDM_DISABLE."""

import io
import sys

import torch

from eva0 import adapt_stream
from eva0.baselines import NoAdapt


def _stream():
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(4, 3, generator=g), torch.randint(0, 2, (4,), generator=g))
            for _ in range(3)]  # fmt: skip


def _method():
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return NoAdapt(torch.nn.Linear(3, 2))


def _stderr(monkeypatch) -> io.StringIO:
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    return buf


def test_adapt_stream_shows_a_bar_when_asked(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    quiet = adapt_stream(_method(), _stream(), progress=False)
    buf = _stderr(monkeypatch)
    shown = adapt_stream(_method(), _stream(), progress=True)
    assert "adapt stream" in buf.getvalue()
    assert "3/3" in buf.getvalue()
    assert shown["per_batch"] == quiet["per_batch"]  # the bar changes nothing
    buf = _stderr(monkeypatch)
    adapt_stream(_method(), iter(_stream()), progress=True)  # no len(): a bar without total
    assert "adapt stream" in buf.getvalue()


def test_default_is_silent_under_tqdm_disable(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    buf = _stderr(monkeypatch)
    adapt_stream(_method(), _stream())
    adapt_stream(_method(), _stream(), progress=True)
    assert buf.getvalue() == ""
