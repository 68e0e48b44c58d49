"""EMANesterov against its definition: base equivalence, NAG reference, black-box recurrence."""

import copy

import numpy as np
import pytest
import torch

from ema_nesterov import EMANesterov, NesterovLookahead
from reference import base_step_from, nag_iterates

BASES = {
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    "muon": lambda ps: torch.optim.Muon(ps, lr=0.02),
}


@pytest.mark.parametrize("name", list(BASES))
@pytest.mark.parametrize("gamma", [0.0, 0.9])
def test_beta_zero_is_the_base_optimizer_bit_for_bit(name, gamma, h):
    bias = name != "muon"  # Muon takes 2-D parameters only
    data = h.batches(20)
    ref, wrapped = h.make_mlp(bias=bias), h.make_mlp(bias=bias)
    h.train(ref, BASES[name](list(ref.parameters())), data)
    h.train(
        wrapped, EMANesterov(BASES[name](list(wrapped.parameters())), gamma=gamma, beta=0.0), data
    )
    for p, q in zip(ref.parameters(), wrapped.parameters(), strict=True):
        assert torch.equal(p, q)


@pytest.mark.parametrize("memory_efficient", [False, True])
def test_gamma_zero_on_gd_is_nesterov_accelerated_gradient(memory_efficient, h):
    lam = np.logspace(-2, 0, 10)
    lr, beta, steps = 1.0, 0.8, 60
    p = torch.nn.Parameter(torch.ones(10, dtype=torch.float64))
    opt = NesterovLookahead(
        torch.optim.SGD([p], lr=lr), beta=beta, memory_efficient=memory_efficient
    )
    lam_t = torch.from_numpy(lam)
    for x, y_next in nag_iterates(lam, lr, beta, steps):
        p.grad = lam_t * p.detach()
        opt.step()
        theta = p.detach() - beta * opt.state[p]["m"]
        np.testing.assert_allclose(theta.numpy(), x, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(p.detach().numpy(), y_next, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["sgd_momentum", "adamw"])
@pytest.mark.parametrize("memory_efficient", [False, True])
def test_black_box_definition_every_step(name, memory_efficient, h):
    gamma, beta = 0.7, 1.3
    model = h.make_mlp(dtype=torch.float64)
    params = list(model.parameters())
    base = BASES[name](params)
    opt = EMANesterov(base, gamma=gamma, beta=beta, memory_efficient=memory_efficient)
    theta = [p.detach().clone() for p in params]
    m = [torch.zeros_like(p) for p in params]
    for x, y in h.batches(8, dtype=torch.float64):
        ys = [p.detach().clone() for p in params]
        for t, mm, yy in zip(theta, m, ys, strict=True):
            torch.testing.assert_close(yy, t + beta * mm, rtol=1e-12, atol=1e-13)
        opt.zero_grad()
        h.mse(model, x, y).backward()
        new_thetas = base_step_from(params, base)  # A_t(y_t) on a copy of the base
        opt.step()
        for i, p in enumerate(params):
            new_theta = new_thetas[i]
            m[i] = gamma * m[i] + (1 - gamma) * (new_theta - theta[i])
            theta[i] = new_theta.clone()
            torch.testing.assert_close(opt.state[p]["m"], m[i], rtol=1e-10, atol=1e-13)
            applied = opt.param_groups[0]["_ema_beta_applied"]
            torch.testing.assert_close(
                p.detach() - applied * opt.state[p]["m"], theta[i], rtol=1e-12, atol=1e-13
            )


@pytest.mark.parametrize("name", ["sgd_momentum", "adamw"])
@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-6), (torch.float64, 1e-13)])
def test_memory_efficient_matches_two_buffers(name, dtype, tol, h):
    # 20 steps: in float32 the folded buffer's cancellation error grows ~5e-8 per step
    data = h.batches(20, dtype=dtype)
    a, b = h.make_mlp(dtype=dtype), h.make_mlp(dtype=dtype)
    h.train(
        a, EMANesterov(BASES[name](list(a.parameters())), 0.9, 1.0, memory_efficient=False), data
    )
    h.train(
        b, EMANesterov(BASES[name](list(b.parameters())), 0.9, 1.0, memory_efficient=True), data
    )
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        rel = float((p - q).detach().norm() / p.detach().norm())
        assert rel < tol


def test_params_without_grad_keep_theta_and_m(h):
    w = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    v = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    opt = EMANesterov(torch.optim.SGD([w, v], lr=0.1), gamma=0.5, beta=1.0)
    for _ in range(3):
        w.grad, v.grad = w.detach().clone(), 2 * v.detach()
        opt.step()
    m_v = opt.state[v]["m"].clone()
    theta_v = (v - opt.param_groups[0]["_ema_beta_applied"] * opt.state[v]["m"]).detach()
    opt.param_groups[0]["ema_beta"] = 0.5  # a new beta is applied to v even without a gradient
    for _ in range(4):
        w.grad, v.grad = w.detach().clone(), None
        opt.step()
    assert torch.equal(opt.state[v]["m"], m_v)
    applied = opt.param_groups[0]["_ema_beta_applied"]
    assert applied == 0.5
    torch.testing.assert_close(v.detach() - applied * m_v, theta_v, rtol=1e-15, atol=1e-15)


def test_changing_beta_between_steps_keeps_theta(h):
    w = torch.nn.Parameter(torch.linspace(-1, 1, 5, dtype=torch.float64))
    opt = EMANesterov(torch.optim.Adam([w], lr=0.05), gamma=0.9, beta=1.0)
    for _ in range(5):
        w.grad = w.detach() ** 3
        opt.step()

    def theta():
        return w.detach() - opt.param_groups[0]["_ema_beta_applied"] * opt.state[w]["m"]

    before = theta().clone()
    opt.param_groups[0]["ema_beta"] = 3.0
    torch.testing.assert_close(theta(), before, rtol=0, atol=0)
    opt.sync_lookahead()
    assert opt.param_groups[0]["_ema_beta_applied"] == 3.0
    torch.testing.assert_close(theta(), before, rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(w.detach(), before + 3.0 * opt.state[w]["m"], rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("memory_efficient", [False, True])
def test_eval_train_round_trip_exact_and_idempotent(memory_efficient, h):
    model = h.make_mlp(dtype=torch.float64)
    opt = EMANesterov(
        torch.optim.AdamW(model.parameters(), lr=1e-2), beta=2.0, memory_efficient=memory_efficient
    )
    h.train(model, opt, h.batches(5, dtype=torch.float64))
    y = [p.detach().clone() for p in model.parameters()]
    theta = [(p - 2.0 * opt.state[p]["m"]).detach() for p in model.parameters()]
    opt.eval()
    opt.eval()
    assert not opt.training
    for p, t in zip(model.parameters(), theta, strict=True):
        torch.testing.assert_close(p.detach(), t, rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="eval mode"):
        opt.step()
    opt.train()
    opt.train()
    for p, yy in zip(model.parameters(), y, strict=True):
        assert torch.equal(p.detach(), yy)
    h.train(model, opt, h.batches(1, dtype=torch.float64))  # training continues after train()


def test_finalize_leaves_theta_and_zero_beta(h):
    model = h.make_mlp(dtype=torch.float64)
    opt = EMANesterov(torch.optim.SGD(model.parameters(), lr=0.05), beta=1.0)
    h.train(model, opt, h.batches(5, dtype=torch.float64))
    theta = [(p - opt.state[p]["m"]).detach() for p in model.parameters()]
    opt.finalize()
    for p, t in zip(model.parameters(), theta, strict=True):
        torch.testing.assert_close(p.detach(), t, rtol=0, atol=0)
    assert all(g["ema_beta"] == 0.0 for g in opt.param_groups)


def test_state_dtype_float32_for_bf16_params(h):
    model = h.make_mlp().to(torch.bfloat16)
    opt = EMANesterov(torch.optim.AdamW(model.parameters(), lr=1e-2), state_dtype=torch.float32)
    x, y = (t.bfloat16() for t in h.batches(1)[0])
    with torch.no_grad():
        start = float(h.mse(model, x, y))
    h.train(model, opt, [(x, y)] * 20)
    assert all(opt.state[p]["m"].dtype == torch.float32 for p in model.parameters())
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())
    with torch.no_grad():
        assert float(h.mse(model, x, y)) < 0.9 * start


@pytest.mark.slow
def test_soap_base_beta_zero_bitwise(h):
    po = pytest.importorskip("pytorch_optimizer")
    data = h.batches(10)
    ref, wrapped = h.make_mlp(), h.make_mlp()
    h.train(ref, po.SOAP(ref.parameters(), lr=1e-2), data)
    h.train(wrapped, EMANesterov(po.SOAP(wrapped.parameters(), lr=1e-2), beta=0.0), data)
    for p, q in zip(ref.parameters(), wrapped.parameters(), strict=True):
        assert torch.equal(p, q)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_skip_nonfinite_skips_the_whole_step_and_counts_it(bad):
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = EMANesterov(torch.optim.Adam(model.parameters(), lr=0.1), skip_nonfinite=True)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 3)).pow(2).sum().backward()
        opt.step()
    before = copy.deepcopy((model.state_dict(), opt.state_dict()))
    opt.zero_grad()
    model(torch.randn(4, 3)).pow(2).sum().backward()
    model.bias.grad[0] = bad
    opt.step()
    assert opt.skipped_steps == 1
    after = (model.state_dict(), opt.state_dict())
    for key, value in before[0].items():
        assert torch.equal(value, after[0][key])
    assert after[1]["ema"]["step"] == before[1]["ema"]["step"]
    assert after[1]["base"][0]["state"][0]["step"] == before[1]["base"][0]["state"][0]["step"]
    restored = EMANesterov(torch.optim.Adam(model.parameters(), lr=0.1), skip_nonfinite=True)
    restored.load_state_dict(opt.state_dict())
    assert restored.skipped_steps == 1


def test_without_the_guard_a_nan_gradient_reaches_the_parameters():
    model = torch.nn.Linear(3, 2)
    opt = EMANesterov(torch.optim.SGD(model.parameters(), lr=0.1))
    model(torch.randn(4, 3)).sum().backward()
    model.bias.grad[0] = float("nan")
    opt.step()
    assert opt.skipped_steps == 0
    assert torch.isnan(model.bias).any()
