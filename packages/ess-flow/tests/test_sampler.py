import math

import numpy as np
import pytest
import torch

from ess_flow import (
    ESSFlow,
    FlowGenerator,
    GaussianLikelihood,
    QuantizedGaussianLikelihood,
    elliptical_slice_step,
)


def _quadratic(w):
    return -0.5 * ((w - 1.5) ** 2).sum(-1) / 0.3**2


def test_ellipse_geometry_bracket_and_slice():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(12, 3, generator=g, dtype=torch.float64)
    ell = _quadratic(w)
    for _ in range(3):
        trace = []
        w_new, ell_new, n_calls = elliptical_slice_step(
            w, ell, _quadratic, generator=g, trace=trace
        )
        assert n_calls == len(trace) >= 1
        last = {}
        for r in trace:
            th = r["theta"][:, None]
            torch.testing.assert_close(
                r["proposal"], r["w"] * torch.cos(th) + r["nu"] * torch.sin(th)
            )
            assert bool((r["theta_min"] <= 0).all())
            assert bool((r["theta_max"] >= 0).all())
            assert bool((r["theta_min"] <= r["theta"]).all())
            assert bool((r["theta"] <= r["theta_max"]).all())
            torch.testing.assert_close(r["ell"], _quadratic(r["proposal"]))
            # accepted iff above the slice
            assert torch.equal(r["accepted"], r["ell"] > r["h"])
            for k, i in enumerate(r["index"].tolist()):
                width = float(r["theta_max"][k] - r["theta_min"][k])
                if i in last:
                    assert width < last[i] + 1e-12  # bracket shrinks monotonically
                last[i] = width
                if bool(r["accepted"][k]):
                    torch.testing.assert_close(w_new[i], r["proposal"][k])
        # first bracket has width 2 pi
        torch.testing.assert_close(
            trace[0]["theta_max"] - trace[0]["theta_min"],
            torch.full((12,), 2 * math.pi, dtype=torch.float64),
        )
        w, ell = w_new, ell_new


def test_accepted_states_exceed_slice_height():
    g = torch.Generator().manual_seed(1)
    w = torch.randn(16, 2, generator=g, dtype=torch.float64)
    ell = _quadratic(w)
    trace = []
    w_new, ell_new, _ = elliptical_slice_step(w, ell, _quadratic, generator=g, trace=trace)
    h = torch.empty(16, dtype=torch.float64)
    for r in trace:
        h[r["index"]] = r["h"]
    assert bool((ell_new > h).all())
    torch.testing.assert_close(ell_new, _quadratic(w_new))


def test_max_shrink_warns_and_keeps_state():
    w = torch.zeros(4, 2)
    ell = torch.zeros(4)

    def impossible(x):
        return torch.full((x.shape[0],), -math.inf)

    with pytest.warns(RuntimeWarning, match="max_shrink"):
        w_new, _, n = elliptical_slice_step(w, ell, impossible, max_shrink=5)
    assert n == 5
    torch.testing.assert_close(w_new, w)


class _RaisingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("backward must never be called")


class NoBackwardVelocity(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.grad_enabled_seen = []

    def forward(self, x, t):
        self.grad_enabled_seen.append(torch.is_grad_enabled())
        return _RaisingBackward.apply(self.lin(torch.cat([x, t[:, None]], -1)))


def test_forward_only_with_raising_backward_and_quantized_numpy_likelihood():
    vel = NoBackwardVelocity()
    gen = FlowGenerator(vel, n_steps=4)

    def numpy_lik(x):  # black box: numpy, rounding
        arr = np.round(x.numpy() * 2) / 2
        return torch.from_numpy(-((arr - 0.5) ** 2).sum(1) / 0.1)

    quant = QuantizedGaussianLikelihood(None, torch.tensor([0.5, 0.0]), 0.3, step=0.5)
    for lik in (numpy_lik, quant):
        res = ESSFlow(gen, lik, (2,)).run(8, 10, seed=0)
        assert torch.isfinite(res.log_lik).all()
    assert vel.grad_enabled_seen
    assert not any(vel.grad_enabled_seen)


def test_call_accounting_matches_instrumented_generator():
    calls = {"n": 0, "rows": 0}

    def gen(z):
        calls["n"] += 1
        calls["rows"] += z.shape[0]
        return 2 * z

    lik = GaussianLikelihood(None, torch.tensor([1.0, -1.0]), 0.3)
    res = ESSFlow(gen, lik, (2,)).run(16, 25, burn_in=5, seed=0)
    assert res.n_generator_calls == calls["n"]
    assert res.n_evaluations == calls["rows"]
    assert int(res.calls_per_iter.sum()) + 1 == calls["n"]
    assert res.z.shape == (20, 16, 2)
    assert res.summary()["n_generator_calls"] == calls["n"]


def test_reproducible_given_seed_or_generator():
    lik = GaussianLikelihood(None, torch.tensor([1.0, -1.0]), 0.3)
    s = ESSFlow(lambda z: z, lik, (2,))
    a = s.run(8, 20, seed=3)
    b = s.run(8, 20, seed=3)
    c = s.run(8, 20, seed=4)
    torch.testing.assert_close(a.z, b.z, rtol=0, atol=0)
    assert not torch.allclose(a.z, c.z)
    d = s.run(8, 20, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(a.z, d.z, rtol=0, atol=0)


def test_multi_fidelity_routing():
    log = []

    def make(tag):
        def gen(z):
            log.append(tag)
            return z * (1.0 if tag == "high" else 1.1)

        return gen

    lik = GaussianLikelihood(None, torch.tensor([0.5]), 0.5)
    s = ESSFlow(make("high"), lik, (1,), low_fidelity_generator=make("low"))
    iters = []
    res = s.run(
        4, 6, low_fidelity_iters=5, seed=0, callback=lambda it, z, ell: iters.append(len(log))
    )
    n_low = iters[4]  # calls made up to the end of the 5 low-fidelity iterations
    assert log[:n_low] == ["low"] * n_low
    assert set(log[n_low:]) == {"high"}
    assert res.z.shape[0] == 6
    assert res.warmup_iters == 5
    # returned samples come from T_high: x == z exactly
    torch.testing.assert_close(res.x, res.z)
    torch.testing.assert_close(res.log_lik, lik(res.flat_x()).reshape(6, 4))


def test_annealing_only_warmup_is_dropped():
    lik = GaussianLikelihood(None, torch.tensor([2.0]), 0.2)
    res = ESSFlow(lambda z: z, lik, (1,)).run(16, 30, anneal_iters=10, seed=0)
    assert res.z.shape[0] == 30
    torch.testing.assert_close(res.log_lik, lik(res.flat_x()).reshape(30, 16))


def test_init_search_for_hard_constraint():
    def inside(x):
        return torch.where(x[:, 0] > 2.0, 0.0, -math.inf)

    s = ESSFlow(lambda z: z, inside, (2,))
    with pytest.raises(ValueError, match="init='search'"):
        ESSFlow(lambda z: z, lambda x: torch.full((x.shape[0],), -math.inf), (2,)).run(4, 3, seed=0)
    res = s.run(8, 20, init="search", seed=0)
    assert bool((res.z[..., 0] > 2.0).all())
    with pytest.raises(RuntimeError, match="max_init_tries"):
        ESSFlow(lambda z: z, lambda x: torch.where(x[:, 0] > 6.0, 0.0, -math.inf), (2,)).run(
            4, 3, init="search", max_init_tries=3, seed=0
        )


def test_init_tensor():
    s = ESSFlow(lambda z: z, lambda x: torch.zeros(x.shape[0]), (2,))
    res = s.run(3, 2, init=torch.ones(3, 2), seed=0)
    assert res.z.shape == (2, 3, 2)
    with pytest.raises(ValueError, match="init tensor must have shape"):
        s.run(3, 2, init=torch.ones(3, 4))


def test_chain_indexed_likelihood_gets_chain_ids():
    y = torch.tensor([[-3.0], [3.0]])

    def lik(x, idx):
        return -0.5 * ((x - y[idx]) ** 2).sum(1) / 0.1**2

    res = ESSFlow(lambda z: z, lik, (1,), chain_indexed=True).run(2, 200, burn_in=100, seed=0)
    m = res.z.mean(0)[:, 0]
    assert m[0] < -2.5
    assert m[1] > 2.5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_chains": 0, "n_iter": 3}, "n_chains"),
        ({"n_chains": 2, "n_iter": 0}, "n_iter"),
        ({"n_chains": 2, "n_iter": 3, "thin": 0}, "thin"),
        ({"n_chains": 2, "n_iter": 3, "burn_in": 3}, "burn_in"),
        ({"n_chains": 2, "n_iter": 3, "init": "bogus"}, "init"),
        ({"n_chains": 2, "n_iter": 3, "low_fidelity_iters": 2}, "low_fidelity_generator"),
    ],
)
def test_run_argument_errors(kwargs, match):
    s = ESSFlow(lambda z: z, lambda x: torch.zeros(x.shape[0]), (2,))
    with pytest.raises(ValueError, match=match):
        s.run(**kwargs)


def test_likelihood_and_generator_errors():
    with pytest.raises(ValueError, match="NaN for chains"):
        ESSFlow(lambda z: z, lambda x: torch.where(x[:, 0] > 0, float("nan"), 0.0), (2,)).run(
            16, 2, seed=0
        )
    with pytest.raises(ValueError, match="must return shape"):
        ESSFlow(lambda z: z, lambda x: torch.zeros(x.shape[0], 2), (2,)).run(4, 2, seed=0)
    with pytest.raises(ValueError, match="non-finite"):
        ESSFlow(lambda z: z / 0.0, lambda x: torch.zeros(x.shape[0]), (2,)).run(4, 2, seed=0)
    with pytest.raises(TypeError, match="generator must be callable"):
        ESSFlow(3, lambda x: x, (2,))


def test_prior_argument_errors():
    f = lambda z: z  # noqa: E731
    lik = lambda x: torch.zeros(x.shape[0])  # noqa: E731
    with pytest.raises(ValueError, match="square"):
        ESSFlow(f, lik, (2,), prior_scale_tril=torch.ones(2, 3))
    with pytest.raises(ValueError, match="lower-triangular"):
        ESSFlow(f, lik, (2,), prior_scale_tril=torch.ones(2, 2))
    with pytest.raises(ValueError, match="positive diagonal"):
        ESSFlow(f, lik, (2,), prior_scale_tril=torch.tensor([[1.0, 0.0], [0.0, -1.0]]))
    with pytest.raises(ValueError, match="prior_mean"):
        ESSFlow(f, lik, (2,), prior_mean=torch.zeros(3))
    with pytest.raises(ValueError, match="source_shape"):
        ESSFlow(f, lik, (0,))
    with pytest.raises(ValueError, match="max_shrink"):
        ESSFlow(f, lik, (2,), max_shrink=0)


def test_run_warns_when_max_shrink_reached():
    def lik(x):  # only the exact start point has positive likelihood
        return torch.where(x[:, 0].abs() < 1e-9, 0.0, -math.inf)

    s = ESSFlow(lambda z: z, lik, (1,), max_shrink=2)
    with pytest.warns(RuntimeWarning, match="max_shrink=2") as rec:
        res = s.run(8, 5, init=torch.zeros(8, 1), seed=0)
    assert res.n_max_shrink == 40
    assert (
        len([r for r in rec if r.category is RuntimeWarning and "max_shrink" in str(r.message)])
        == 5
    )
    torch.testing.assert_close(res.z, torch.zeros(5, 8, 1))
