"""torch ``nn.Module`` models (optional extra); slow because importing torch takes seconds."""

import numpy as np
import pytest

import esensc


@pytest.mark.slow
def test_torch_module_matches_numpy_twin(rng):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    net = net.double()
    W1, b1 = net[0].weight.detach().numpy(), net[0].bias.detach().numpy()
    W2, b2 = net[2].weight.detach().numpy(), net[2].bias.detach().numpy()
    twin = lambda Z: np.tanh(Z @ W1.T + b1) @ W2.T + b2  # noqa: E731
    bg, X = rng.normal(size=(6, 5)), rng.normal(size=(3, 5))
    got = esensc.Explainer(net, bg, batch_size=17)(X)
    np.testing.assert_allclose(got.values, esensc.Explainer(twin, bg).attribute(X), atol=1e-12)
    assert got.values.shape == (3, 5, 2)
    assert not any(p.grad is not None for p in net.parameters())
