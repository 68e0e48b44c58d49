import math

import pytest
import torch

from ess_flow import (
    ESSFlow,
    FlowGenerator,
    GaussianLikelihood,
    MLPVelocity,
    NoiseAugmentedGenerator,
    from_callable,
    from_flow_matching,
    from_torchcfm,
)


def _linear_velocity(x, t):
    return -x


@pytest.mark.parametrize(("method", "tol"), [("euler", 5e-2), ("midpoint", 5e-3), ("rk4", 1e-6)])
def test_solvers_converge_to_exact_flow(method, tol):
    z = torch.randn(5, 3, dtype=torch.float64)
    x = FlowGenerator(_linear_velocity, n_steps=20, method=method)(z)
    torch.testing.assert_close(x, z * math.exp(-1.0), atol=tol, rtol=0)


def test_time_receives_batch_tensor_and_reversal():
    seen = []

    def v(x, t):
        seen.append(t.clone())
        return torch.ones_like(x)

    FlowGenerator(v, n_steps=4)(torch.zeros(3, 2))
    assert all(t.shape == (3,) for t in seen)
    torch.testing.assert_close(
        torch.stack([t[0] for t in seen]), torch.tensor([0.0, 0.25, 0.5, 0.75])
    )
    seen.clear()
    out = FlowGenerator(v, n_steps=4, time_reversed=True)(torch.zeros(3, 2))
    torch.testing.assert_close(
        torch.stack([t[0] for t in seen]), torch.tensor([1.0, 0.75, 0.5, 0.25])
    )
    torch.testing.assert_close(out, -torch.ones(3, 2))


def test_with_steps_and_postprocess():
    gen = FlowGenerator(_linear_velocity, n_steps=10, postprocess=torch.sign)
    low = gen.with_steps(2)
    assert low.n_steps == 2
    assert gen.n_steps == 10
    out = gen(torch.tensor([[0.5, -2.0]]))
    torch.testing.assert_close(out, torch.tensor([[1.0, -1.0]]))


def test_generator_errors():
    with pytest.raises(ValueError, match="n_steps"):
        FlowGenerator(_linear_velocity, n_steps=0)
    with pytest.raises(ValueError, match="method"):
        FlowGenerator(_linear_velocity, method="heun3")
    with pytest.raises(TypeError, match="velocity must be callable"):
        FlowGenerator(None)
    with pytest.raises(ValueError, match="call must be"):
        from_torchcfm(torch.nn.Linear(3, 2), call="bad")


class TorchCFMStyleMLP(torch.nn.Module):
    """Stand-in for torchcfm.models.MLP: input is cat([x, t]) with t as the last column."""

    def __init__(self, dim):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(dim + 1, 16), torch.nn.SELU(), torch.nn.Linear(16, dim)
        )

    def forward(self, xt):
        return self.net(xt)


class UNetWrapperStyle(torch.nn.Module):
    """Stand-in for torchcfm.models.unet.UNetModelWrapper: forward(t, x)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 1, 3, padding=1)

    def forward(self, t, x, y=None):
        return self.conv(x) * t[:, None, None, None]


def test_torchcfm_adapters_match_manual_euler():
    torch.manual_seed(0)
    net = TorchCFMStyleMLP(2)
    gen = from_torchcfm(net, n_steps=5)
    z = torch.randn(4, 2)
    x = z.clone()
    with torch.no_grad():
        for k in range(5):
            t = torch.full((4, 1), k / 5)
            x = x + 0.2 * net(torch.cat([x, t], 1))
    torch.testing.assert_close(gen(z), x)
    img = from_torchcfm(UNetWrapperStyle(), n_steps=3, call="t_x")
    assert img(torch.randn(2, 1, 4, 4)).shape == (2, 1, 4, 4)
    with pytest.raises(ValueError, match="flat x"):
        from_torchcfm(net, n_steps=2)(torch.randn(2, 1, 2))


def test_flow_matching_and_callable_adapters():
    class ModelWrapper(torch.nn.Module):
        def forward(self, x, t, **extras):
            assert t.ndim == 0
            return -x * extras["scale"]

    class ODESolver:
        def __init__(self, velocity_model):
            self.velocity_model = velocity_model

    z = torch.randn(3, 2, dtype=torch.float64)
    ref = FlowGenerator(_linear_velocity, n_steps=8, method="rk4")(z)
    a = from_flow_matching(ModelWrapper(), n_steps=8, method="rk4", scale=1.0)(z)
    b = from_flow_matching(ODESolver(ModelWrapper()), n_steps=8, method="rk4", scale=1.0)(z)
    c = from_callable(_linear_velocity, n_steps=8, method="rk4")(z)
    torch.testing.assert_close(a, ref)
    torch.testing.assert_close(b, ref)
    torch.testing.assert_close(c, ref)


def test_adapter_inside_sampler_with_mlp_velocity():
    torch.manual_seed(0)
    vel = MLPVelocity(2, hidden=8, n_layers=1)
    gen = from_torchcfm(lambda xt: vel(xt[:, :2], xt[:, 2]), n_steps=3)
    res = ESSFlow(gen, GaussianLikelihood(None, torch.zeros(2), 1.0), (2,)).run(4, 5, seed=0)
    torch.testing.assert_close(res.flat_x(), gen(res.flat_z()))


def test_noise_augmented_generator_is_deterministic_and_sampleable():
    gen = NoiseAugmentedGenerator(_linear_velocity, (2,), n_steps=4, noise_scale=lambda t: 0.5)
    z = torch.randn(3, *gen.source_shape)
    torch.testing.assert_close(gen(z), gen(z))
    # zero step noise reduces to the Euler ODE
    z0 = z.clone()
    z0[:, 1:] = 0
    torch.testing.assert_close(gen(z0), FlowGenerator(_linear_velocity, n_steps=4)(z[:, 0]))
    res = ESSFlow(gen, GaussianLikelihood(None, torch.ones(2), 0.5), gen.source_shape).run(
        4, 5, seed=0
    )
    assert res.x.shape == (5, 4, 2)
    with pytest.raises(ValueError, match="z must have shape"):
        gen(torch.zeros(3, 2))
