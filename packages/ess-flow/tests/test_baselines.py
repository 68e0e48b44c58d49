import math

import pytest
import torch

from ess_flow import (
    ContactLikelihood,
    QuantizedGaussianLikelihood,
    dps_flow_sample,
    dps_guidance,
    pcn_sample,
    sir_sample,
)
from methodkit.testing import finite_difference_grad


def _vel(x, t):
    return torch.tanh(x) * (1 + t[:, None])


def test_dps_guidance_matches_finite_differences_on_quadratic():
    y = torch.tensor([0.3, -0.7], dtype=torch.float64)

    def log_lik(x):
        return -0.5 * ((x - y) ** 2).sum(-1) / 0.2**2

    x = torch.tensor([[0.1, 0.4]], dtype=torch.float64)
    t = 0.3
    g = dps_guidance(_vel, log_lik, x, t)

    def f(arr):
        xx = torch.as_tensor(arr).reshape(1, 2)
        tt = torch.full((1,), t, dtype=torch.float64)
        return float(log_lik(xx + (1 - t) * _vel(xx, tt)).sum())

    ref = finite_difference_grad(f, x.numpy())
    torch.testing.assert_close(g, torch.as_tensor(ref), rtol=1e-6, atol=1e-8)


def test_dps_pulls_towards_observation_and_scale_zero_is_prior():
    y = torch.tensor([1.5, 0.0])

    def log_lik(x):
        return -0.5 * ((x - y) ** 2).sum(-1) / 0.3**2

    prior = dps_flow_sample(lambda x, t: torch.zeros_like(x), log_lik, (2,), 500, scale=0.0, seed=0)
    guided = dps_flow_sample(
        lambda x, t: torch.zeros_like(x), log_lik, (2,), 500, scale=0.3, seed=0
    )
    assert abs(float(prior.mean(0)[0])) < 0.2
    assert float(guided.mean(0)[0]) > 1.0


def test_dps_raises_without_gradient():
    contacts = ContactLikelihood([(0, 1)], torch.tensor([True]), 1.0, 0.05)
    with pytest.raises(RuntimeError, match="ESSFlow"):
        dps_flow_sample(lambda x, t: torch.zeros_like(x), contacts, (2, 3), 4, n_steps=2, seed=0)
    with pytest.raises(RuntimeError, match="ESSFlow"):
        dps_flow_sample(_vel, lambda x: torch.zeros(x.shape[0]), (2,), 4, n_steps=2, seed=0)
    # a quantized likelihood *has* a (zero) gradient: DPS runs but gets no signal
    q = QuantizedGaussianLikelihood(None, torch.tensor([1.0, 1.0]), 0.05, step=0.5)
    g = dps_guidance(_vel, q, torch.randn(3, 2), 0.5)
    assert torch.count_nonzero(g) == 0


def test_dps_argument_errors():
    with pytest.raises(ValueError, match="n_samples"):
        dps_flow_sample(_vel, lambda x: x.sum(-1), (2,), 0)
    with pytest.raises(ValueError, match="scale"):
        dps_flow_sample(_vel, lambda x: x.sum(-1), (2,), 2, scale=-1.0)


def test_sir_weights_and_n_eff():
    y = torch.tensor([1.0])

    def log_lik(x):
        return -0.5 * ((x - y) ** 2).sum(-1) / 0.5**2

    res = sir_sample(lambda z: z, log_lik, (1,), 4000, 1000, seed=0, batch_size=1000)
    assert math.isclose(float(res.weights.sum()), 1.0, rel_tol=1e-9)
    assert math.isclose(res.n_eff, float(1.0 / (res.weights**2).sum()), rel_tol=1e-12)
    assert 1 <= res.n_eff <= 4000
    # posterior N(0.8, 0.2): mean with SE ~ 0.45 / sqrt(n_eff) plus resampling noise
    assert abs(float(res.x.mean()) - 0.8) < 0.05
    assert res.n_evaluations == 4000
    with pytest.raises(ValueError, match="-inf"):
        sir_sample(lambda z: z, lambda x: torch.full((x.shape[0],), -math.inf), (1,), 10, 5, seed=0)


def test_pcn_beta_zero_never_moves_and_targets_posterior():
    def log_lik(x):
        return -0.5 * ((x - 1.0) ** 2).sum(-1) / 0.5**2

    frozen = pcn_sample(lambda z: z, log_lik, (2,), 8, 20, beta=0.0, seed=0)
    torch.testing.assert_close(frozen.z, frozen.z[:1].expand_as(frozen.z))
    res = pcn_sample(lambda z: z, log_lik, (2,), 200, 300, beta=0.5, burn_in=100, seed=0)
    assert 0.05 < res.acceptance_rate < 0.95
    # posterior mean 0.8 per coordinate; tolerance >> MC error (n_eff in the thousands)
    torch.testing.assert_close(res.flat_x().mean(0), torch.full((2,), 0.8), atol=0.05, rtol=0)
    assert res.n_evaluations == 200 * 301
    with pytest.raises(ValueError, match="beta"):
        pcn_sample(lambda z: z, log_lik, (2,), 2, 2, beta=1.5)
