"""eva0 test set-up: small models (the root conftest pins one torch thread)."""

import pytest
import torch


class Counter(torch.nn.Module):
    """Counts calls and records whether autograd was enabled inside them."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.count = 0
        self.grad_enabled = []

    def forward(self, x):
        self.count += 1
        self.grad_enabled.append(torch.is_grad_enabled())
        return self.inner(x)


def mlp(seed=0, dtype=torch.float32, norm="ln"):
    g = torch.Generator().manual_seed(seed)
    layers = [torch.nn.Linear(6, 8)]
    layers.append(torch.nn.LayerNorm(8) if norm == "ln" else torch.nn.BatchNorm1d(8))
    layers += [torch.nn.GELU(), torch.nn.Linear(8, 5)]
    net = torch.nn.Sequential(*layers).to(dtype)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(
                torch.randn(p.shape, generator=g, dtype=dtype) * 0.5
                + (1.0 if p.dim() == 1 and p.shape[0] == 8 else 0.0)
            )
    return net.eval()


@pytest.fixture
def counter():
    return Counter


@pytest.fixture
def make_mlp():
    return mlp
