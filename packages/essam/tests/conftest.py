import pytest
import torch


class Toy:
    """Three tensors (d = 60) and a smooth reward; the dense-exactness problem of the spec."""

    def __init__(self, dtype=torch.float32, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.shapes = [(4, 6), (6, 5), (6,)]
        self.params = [
            torch.nn.Parameter(torch.randn(s, generator=g).to(dtype)) for s in self.shapes
        ]
        self.target = torch.randn(60, generator=g).double()
        self.w = torch.linspace(0.5, 2.0, 60, dtype=torch.float64)

    def flat(self):
        return torch.cat([p.detach().double().reshape(-1) for p in self.params])

    def reward_flat(self, v):
        return float(-(self.w * (v - self.target) ** 2).sum() + torch.sin(3 * v).sum())

    def closure(self):
        return self.reward_flat(self.flat())


@pytest.fixture
def toy_cls():
    return Toy
