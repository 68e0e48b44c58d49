"""Progress bars: shown when asked (progress=True), silent by default under TQDM_DISABLE."""

import io
import sys

import torch

from eris_fl import ERISConfig, flatten, run_simulation
from eris_fl.attacks import dlg


def _data():
    g = torch.Generator().manual_seed(0)
    X, y = torch.randn(40, 5, generator=g), torch.randint(0, 3, (40,), generator=g)
    return [(X[i::4], y[i::4]) for i in range(4)]


def _model():
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return torch.nn.Linear(5, 3)


def _stderr(monkeypatch) -> io.StringIO:
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    return buf


def _gradient(model):
    x, y = torch.rand(1, 5), torch.tensor([1])
    loss = torch.nn.functional.cross_entropy(model(x), y)
    return torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, model.parameters())])


def test_rounds_and_dlg_show_a_bar_when_asked(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    quiet = run_simulation(_model(), _data(), ERISConfig(num_aggregators=2), 3, progress=False)
    buf = _stderr(monkeypatch)
    shown = run_simulation(_model(), _data(), ERISConfig(num_aggregators=2), 3, progress=True)
    assert "ERIS rounds" in buf.getvalue()
    assert "3/3" in buf.getvalue()
    torch.testing.assert_close(shown.params, quiet.params)  # the bar changes nothing
    model = _model()
    dlg(model, _gradient(model), label=1, shape=(1, 5), iters=4, progress=True)
    assert "DLG" in buf.getvalue()


def test_default_is_silent_under_tqdm_disable(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    buf = _stderr(monkeypatch)
    h = run_simulation(_model(), _data(), ERISConfig(num_aggregators=2), 2)
    run_simulation(_model(), _data(), ERISConfig(num_aggregators=2), 2, progress=True)
    model = _model()
    dlg(model, _gradient(model), label=1, shape=(1, 5), iters=2)
    assert buf.getvalue() == ""
    assert h.params.numel() == flatten(_model()).numel()


def test_gloo_worker_bar_on_rank_zero(monkeypatch):
    import torch.distributed as dist

    from eris_fl.distributed import free_port, run_worker

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    buf = _stderr(monkeypatch)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1
    )
    try:
        run_worker(0, 1, _model, lambda r: _data()[r], ERISConfig(num_aggregators=1), 2,
                   progress=True)  # fmt: skip
    finally:
        dist.destroy_process_group()
    assert "ERIS rounds (gloo, 1 ranks)" in buf.getvalue()
