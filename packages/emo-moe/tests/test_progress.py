"""Progress bars: shown when asked (progress=True), silent by default under TQDM_DISABLE."""

import io
import sys

import torch

from emo_moe import (
    TinyMoEConfig,
    TinyMoELM,
    domain_losses,
    expert_importance,
    expert_usage_matrix,
    rows_loss,
)


def _tiny() -> TinyMoELM:
    cfg = TinyMoEConfig(
        d_model=16, n_layers=1, n_heads=2, max_len=16, num_experts=4, top_k=2, d_expert=8,
        pool_min=2, pool_max=4, pool_eval=4,
    )  # fmt: skip
    return TinyMoELM(cfg)


def _stderr(monkeypatch) -> io.StringIO:
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    return buf


def _run_all(model: TinyMoELM, progress: bool | None) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    docs = [torch.randint(0, 256, (10,), generator=g) for _ in range(3)]
    imp = expert_importance(model, docs, progress=progress)
    rows = torch.randint(0, 256, (4, 12), generator=g)
    rows_loss(model, rows, batch_size=2, progress=progress)
    domain_losses(model, {"a": ["hello world"], "b": ["x = 1"]}, 8, progress=progress)
    expert_usage_matrix(model, ["abc", "defg"], 8, progress=progress)
    return imp


def test_bars_when_asked(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    model = _tiny()
    silent = _run_all(model, progress=False)
    buf = _stderr(monkeypatch)
    shown = _run_all(model, progress=True)
    out = buf.getvalue()
    for desc in ("expert importance", "loss", "domain losses", "expert usage"):
        assert desc in out
    assert "3/3" in out  # one step per calibration document
    torch.testing.assert_close(shown, silent)  # the bar changes nothing


def test_default_is_silent_under_tqdm_disable(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    model = _tiny()
    buf = _stderr(monkeypatch)
    _run_all(model, progress=None)
    _run_all(model, progress=True)
    assert buf.getvalue() == ""
