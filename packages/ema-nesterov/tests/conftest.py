"""Shared helpers for the ema-nesterov tests, exposed as the fixture ``h``.

The benchmark's own modules
(``bench/quadratic.py``, ``bench/lm.py``, tested by ``test_bench_quadratic_lm.py``) as
``ema_nesterov_bench_quadratic`` / ``ema_nesterov_bench_lm``: every package's tests share one
pytest run, so plain names would collide.
"""

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

HERE = Path(__file__).resolve().parent


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_load("ema_nesterov_bench_quadratic", HERE.parent / "bench" / "quadratic.py")
_load("ema_nesterov_bench_lm", HERE.parent / "bench" / "lm.py")


def make_mlp(seed=0, dtype=torch.float32, bias=True):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch.nn.Sequential(
            torch.nn.Linear(6, 8, bias=bias),
            torch.nn.Tanh(),
            torch.nn.Linear(8, 3, bias=bias),
        ).to(dtype)


def batches(n, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [
        (
            torch.randn(16, 6, generator=gen, dtype=dtype),
            torch.randn(16, 3, generator=gen, dtype=dtype),
        )
        for _ in range(n)
    ]


def mse(model, x, y):
    return ((model(x) - y) ** 2).mean()


def train(model, opt, data):
    for x, y in data:
        opt.zero_grad()
        mse(model, x, y).backward()
        opt.step()


@pytest.fixture
def h():
    return SimpleNamespace(make_mlp=make_mlp, batches=batches, mse=mse, train=train)
