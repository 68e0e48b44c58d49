"""engine-zo test set-up: toy model and recording closure; bench/ importable for its helper test.

``tests/test_bench_helper.py`` tests the benchmark's forward-passes-to-target helper, which lives
in ``bench/zo_target.py`` (bench code is not part of the wheel).
"""

import sys
from pathlib import Path

import pytest
import torch

sys.path.append(str(Path(__file__).resolve().parent.parent / "bench"))


class Recorder:
    """A closure that records the weights it is evaluated at and the losses it returns."""

    def __init__(self, params, loss_fn):
        self.params = list(params)
        self.loss_fn = loss_fn
        self.points = []
        self.values = []

    def __call__(self):
        assert not torch.is_grad_enabled()
        self.points.append([p.detach().clone() for p in self.params])
        value = self.loss_fn()
        self.values.append(float(value))
        return value


class Toy(torch.nn.Module):
    """One 6x5 weight and a bias: the dense-exactness model of the spec."""

    def __init__(self, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.weight = torch.nn.Parameter(torch.randn(6, 5, generator=g))
        self.bias = torch.nn.Parameter(torch.randn(6, generator=g))
        self.x = torch.randn(16, 5, generator=g)
        self.y = torch.randn(16, 6, generator=g)

    def loss(self):
        out = torch.tanh(self.x @ self.weight.T + self.bias)
        return ((out - self.y) ** 2).mean()


@pytest.fixture
def toy():
    return Toy()


@pytest.fixture
def recorder():
    return Recorder
