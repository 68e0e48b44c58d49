"""The step-time bench's designs are EMA-Nesterov: the carried fold against the library."""

import importlib.util
from pathlib import Path

import pytest
import torch

from ema_nesterov import EMANesterov

_SPEC = importlib.util.spec_from_file_location(
    "ema_nesterov_bench_steptime", Path(__file__).resolve().parent.parent / "bench" / "steptime.py"
)
steptime = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(steptime)


def _params(dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(7, 5), (5,), (3, 7)]
    return [torch.nn.Parameter(torch.randn(s, generator=gen, dtype=dtype)) for s in shapes]


@pytest.mark.parametrize(
    ("dtype", "base", "tol"),
    [
        (torch.float64, "adamw", 1e-12),
        (torch.float64, "sgd", 1e-12),
        (torch.float32, "adamw_fused", 2e-5),
    ],
)
def test_carried_fold_equals_library(dtype, base, tol):
    make = {
        "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, foreach=True),
        "adamw_fused": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, fused=True),
        "sgd": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, foreach=True),
    }[base]
    ps_lib, ps_new = _params(dtype), _params(dtype)
    lib = EMANesterov(make(ps_lib), gamma=0.9, beta=1.0, memory_efficient=False)
    # renorm_at 16: the scale (10 at the start, x1.1 per step) is renormalised ~5 times.
    new = steptime.CarriedFold(make(ps_new), gamma=0.9, beta=1.0, renorm_at=16.0)
    gen = torch.Generator().manual_seed(1)
    for _ in range(30):
        for a, b in zip(ps_lib, ps_new, strict=True):
            # the gradient of 1/2 |p - target|^2 + noise, at each run's own lookahead point
            g = torch.randn(a.shape, generator=gen, dtype=dtype)
            a.grad = a.detach() + g
            b.grad = b.detach() + g
        lib.step()
        new.step()
    assert new.scale < 16.0
    for a, b in zip(ps_lib, ps_new, strict=True):
        assert torch.isfinite(b).all()
        torch.testing.assert_close(b.detach(), a.detach(), rtol=tol, atol=tol)
        torch.testing.assert_close(new.theta(b), lib.theta(a), rtol=tol, atol=tol)
        m = lib.state[a]["m"]
        assert m.abs().max() > 1e-3  # the EMA is not trivially zero
        torch.testing.assert_close(new.m(b), m, rtol=50 * tol, atol=50 * tol)


def test_transformer_stack_has_20m_parameters():
    params = steptime.transformer_params(cfg=steptime.QUICK_TRANSFORMER)
    assert all(p.grad is not None and p.grad.shape == p.shape for p in params)
    cfg = steptime.TRANSFORMER
    per_layer = 4 * cfg["d"] ** 2 + 2 * cfg["d"] * cfg["ff"] + cfg["ff"] + 9 * cfg["d"]
    n = cfg["vocab"] * cfg["d"] + cfg["layers"] * per_layer
    assert 19e6 < n < 21e6
