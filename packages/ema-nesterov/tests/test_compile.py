"""torch.compile of the model and of the optimizer step: same trajectory as eager.

Inductor on CPU compiles C++ (tens of seconds on a busy 2-core machine): marked slow, and
skipped with the reason where no C++ compiler is found.
"""

import shutil
import time

import pytest
import torch

from ema_nesterov import EMANesterov

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not any(shutil.which(c) for c in ("g++", "c++", "clang++")),
        reason="inductor's C++ toolchain (g++/c++/clang++) is missing",
    ),
]
STEPS = 6


def _model():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8))


def _data():
    gen = torch.Generator().manual_seed(1)
    return [(torch.randn(16, 32, generator=gen), torch.randn(16, 8, generator=gen))] * STEPS


def _run(compile_model: bool, compile_step: bool, fused: bool):
    torch._dynamo.reset()
    model = _model()
    kw = {"fused": True} if fused else {"foreach": True}
    opt = EMANesterov(torch.optim.AdamW(model.parameters(), lr=1e-2, **kw), gamma=0.9, beta=0.5)
    forward = torch.compile(model) if compile_model else model
    step = torch.compile(opt.step) if compile_step else opt.step
    times = []
    for x, y in _data():
        opt.zero_grad()
        ((forward(x) - y) ** 2).mean().backward()
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    opt.eval()
    theta = [p.detach().clone() for p in model.parameters()]
    opt.train()
    return [p.detach().clone() for p in model.parameters()], theta, times


@pytest.mark.parametrize(
    ("compile_model", "compile_step", "fused"),
    [(True, False, False), (False, True, False), (True, True, True)],
)
def test_compiled_run_matches_eager(compile_model, compile_step, fused):
    y_ref, theta_ref, _ = _run(False, False, fused)
    y, theta, times = _run(compile_model, compile_step, fused)
    for got, want in zip(y + theta, y_ref + theta_ref, strict=True):
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert len(times) == STEPS
