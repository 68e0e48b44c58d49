"""E-step exactness and the EM == exact-gradient identity (float64)."""

import numpy as np
import pytest
import torch

from em_nesy import (
    AdditionDP,
    BeliefPropagation,
    DigitMLP,
    EMNeSy,
    Enumeration,
    FunctionProgram,
    HardEM,
    StochasticEM,
    e_step,
    em_loss,
    nesy_nll,
)
from reference import brute_force_posterior, fisher_logit_gradient


@pytest.mark.parametrize("n_digits", [1, 2])
@pytest.mark.parametrize("engine_cls", [Enumeration, AdditionDP])
def test_fisher_identity_logits(addition_batch, n_digits, engine_cls):
    program, logits, y = addition_batch(n_digits, batch=5)
    a = logits.clone().requires_grad_(True)
    em_loss(a, e_step(a, y, engine_cls(program))).backward()
    b = logits.clone().requires_grad_(True)
    nesy_nll(b, y, program).backward()
    torch.testing.assert_close(a.grad, b.grad, atol=1e-10, rtol=0)
    # per logit both gradients are (softmax - posterior marginal) / B
    q = e_step(logits, y, engine_cls(program)).marginals
    torch.testing.assert_close(a.grad, fisher_logit_gradient(logits, q), atol=1e-12, rtol=0)


@pytest.mark.parametrize("n_digits", [1, 2])
@pytest.mark.parametrize("engine_cls", [Enumeration, AdditionDP])
def test_fisher_identity_network_weights(addition_batch, n_digits, engine_cls):
    program, _, y = addition_batch(n_digits, batch=6, seed=3)
    torch.manual_seed(0)
    model = DigitMLP(hidden=16).double()
    x = torch.rand(6, 2 * n_digits, 8, 8, dtype=torch.float64)
    logits = model(x)
    em_loss(logits, e_step(logits, y, engine_cls(program))).backward()
    g_em = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    nesy_nll(model(x), y, program).backward()
    for g, p in zip(g_em, model.parameters(), strict=True):
        torch.testing.assert_close(g, p.grad, atol=1e-10, rtol=0)


def test_one_em_step_equals_exact_gradient_step(addition_batch):
    program, _, y = addition_batch(2, batch=8, seed=5)
    x = torch.rand(8, 4, 8, 8, dtype=torch.float64)
    torch.manual_seed(1)
    m_em = DigitMLP(hidden=16).double()
    m_ex = DigitMLP(hidden=16).double()
    m_ex.load_state_dict(m_em.state_dict())
    em = EMNeSy(m_em, AdditionDP(program), torch.optim.SGD(m_em.parameters(), lr=0.5))
    opt = torch.optim.SGD(m_ex.parameters(), lr=0.5)
    for _ in range(3):
        em.train_step(x, y)
        opt.zero_grad()
        nesy_nll(m_ex(x), y, program).backward()
        opt.step()
    for p, q in zip(m_em.parameters(), m_ex.parameters(), strict=True):
        torch.testing.assert_close(p, q, atol=1e-10, rtol=0)


def test_fisher_identity_user_program():
    program = FunctionProgram(lambda z: (z[0] * z[1] + z[2]) % 4, domains=(4, 3, 4))
    gen = torch.Generator().manual_seed(0)
    parts = [torch.randn(5, d, generator=gen, dtype=torch.float64) for d in (4, 3, 4)]
    y = [0, 1, 2, 3, 1]
    a = [p.clone().requires_grad_(True) for p in parts]
    em_loss(a, e_step(a, y, Enumeration(program))).backward()
    b = [p.clone().requires_grad_(True) for p in parts]
    nesy_nll(b, y, program).backward()
    for p, q in zip(a, b, strict=True):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-10, rtol=0)


@pytest.mark.parametrize("n_digits", [1, 2, 3])
def test_dp_equals_enumeration(addition_batch, n_digits):
    program, logits, y = addition_batch(n_digits, batch=3, seed=n_digits)
    exact = Enumeration(program).posterior(logits, y)  # N=3: exactly 1e6 states (inclusive)
    dp = AdditionDP(program).posterior(logits, y)
    torch.testing.assert_close(dp.marginals, exact.marginals, atol=1e-12, rtol=0)
    torch.testing.assert_close(dp.log_evidence, exact.log_evidence, atol=1e-12, rtol=1e-12)
    assert dp.valid.all()


@pytest.mark.parametrize("n_digits", [1, 2])
@pytest.mark.parametrize("engine_cls", [Enumeration, AdditionDP])
def test_exact_engines_equal_brute_force_reference(addition_batch, n_digits, engine_cls):
    program, logits, y = addition_batch(n_digits, batch=3, seed=n_digits)
    marginals, log_evidence = brute_force_posterior(logits, y, program)
    post = engine_cls(program).posterior(logits, y)
    torch.testing.assert_close(post.marginals, marginals, atol=1e-12, rtol=0)
    torch.testing.assert_close(post.log_evidence, log_evidence, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("n_digits", [1, 2, 6])
def test_bp_on_carry_chain_equals_dp(addition_batch, n_digits):
    program, logits, y = addition_batch(n_digits, batch=4, seed=7)
    dp = AdditionDP(program).posterior(logits, y)
    bp = BeliefPropagation(program).posterior(logits, y)
    torch.testing.assert_close(bp.marginals, dp.marginals, atol=1e-10, rtol=0)
    torch.testing.assert_close(bp.log_evidence, dp.log_evidence, atol=1e-10, rtol=0)
    assert bp.stats["tree"] == 1.0


@pytest.mark.parametrize("n_digits", [1, 2])
def test_hard_em_is_bruteforce_map(addition_batch, n_digits):
    program, logits, y = addition_batch(n_digits, batch=6, seed=11)
    z_map, _ = Enumeration(program).map_state(logits, y)
    for engine in (AdditionDP(program), BeliefPropagation(program), Enumeration(program)):
        post = HardEM(engine).posterior(logits, y)
        z = post.marginals.argmax(-1)
        assert torch.equal(z, z_map)
        assert program.consistent(z.numpy()[:, None, :], y).all()
        assert torch.equal(post.marginals.sum(-1), torch.ones(6, 2 * n_digits, dtype=torch.float64))


def test_stochastic_em_samples_the_exact_posterior(addition_batch):
    program, logits, y = addition_batch(2, batch=3, seed=2, scale=1.0)
    post = StochasticEM(AdditionDP(program), n=20000, generator=0).posterior(logits, y)
    exact = AdditionDP(program).posterior(logits, y)
    assert program.consistent(post.samples.numpy(), y).all()
    assert (post.marginals - exact.marginals).abs().max() < 0.02


def test_problog_engine_equals_dp(addition_batch):
    pytest.importorskip("problog")
    pytest.importorskip("pysdd")
    from em_nesy import ProbLogEngine

    program, logits, y = addition_batch(1, batch=3, seed=4)
    rules = "sum(S) :- digit(a, A), digit(b, B), S is A + B."
    symbols = [[f"digit({v}, {k})" for k in range(10)] for v in ("a", "b")]
    engine = ProbLogEngine(rules, symbols, evidence=lambda row: f"sum({10 * row[0] + row[1]})")
    post = engine.posterior(logits, y)
    dp = AdditionDP(program).posterior(logits, y)
    torch.testing.assert_close(post.marginals, dp.marginals, atol=1e-8, rtol=0)
    assert post.valid.all()
    bad = engine.posterior(logits[:1], np.array([[1, 9]]))  # 19 > 9 + 9
    assert not bad.valid.any()
