"""Sampling engines, the M-step loss and engine invariants."""

import numpy as np
import pytest
import torch

from em_nesy import (
    ABCSampling,
    AdditionDP,
    BeliefPropagation,
    Enumeration,
    HardEM,
    MultiDigitAddition,
    Posterior,
    RejectionSampling,
    StochasticEM,
    e_step,
    em_loss,
    em_loss_from_samples,
)


def test_rejection_matches_exact_with_many_samples(addition_batch):
    program, logits, y = addition_batch(1, batch=3, seed=1, scale=1.0)
    post = RejectionSampling(program, n_samples=200_000, generator=0).posterior(logits, y)
    exact = AdditionDP(program).posterior(logits, y)
    assert (post.marginals - exact.marginals).abs().max() <= 0.02
    assert 0 < post.stats["acceptance_rate"] < 1
    assert torch.allclose(post.weights.sum(1), torch.ones(3, dtype=torch.float64))


def test_abc_with_tiny_tau_equals_rejection(addition_batch):
    program, logits, y = addition_batch(2, batch=4, seed=2, scale=0.5)
    rej = RejectionSampling(program, n_samples=4000, generator=5).posterior(logits, y)
    abc = ABCSampling(program, n_samples=4000, tau=1e-4, generator=5).posterior(logits, y)
    assert torch.equal(rej.valid, abc.valid)
    torch.testing.assert_close(abc.marginals, rej.marginals, atol=1e-12, rtol=0)
    # a larger tau keeps near misses: every example gets some weight
    loose = ABCSampling(program, n_samples=64, tau=0.5, generator=5).posterior(logits, y)
    assert loose.valid.all()


def test_no_accepted_sample_is_invalid_without_nan():
    program = MultiDigitAddition(6)
    logits = torch.zeros(2, 12, 10)
    y = torch.tensor([[0, 9, 9, 9, 9, 9, 9], [0, 0, 0, 0, 0, 0, 0]])
    post = RejectionSampling(program, n_samples=16, generator=0).posterior(logits, y)
    assert not post.valid.any()
    assert torch.isfinite(post.marginals).all()
    assert torch.isfinite(post.weights).all()
    with pytest.warns(UserWarning, match="no valid example"):
        loss = em_loss(logits.clone().requires_grad_(True), post)
    assert loss.item() == 0.0


def test_em_loss_ignores_invalid_rows(addition_batch):
    program, logits, y = addition_batch(1, batch=4, seed=3)
    y = y.clone()
    y[1] = torch.tensor([1, 9])  # 19: impossible for one-digit operands
    post = e_step(logits, y, AdditionDP(program))
    assert post.valid.tolist() == [True, False, True, True]
    full = em_loss(logits, post, reduction="none")
    assert full[1] == 0
    keep = [0, 2, 3]
    sub = Posterior(post.marginals[keep], post.valid[keep])
    torch.testing.assert_close(em_loss(logits, post), em_loss(logits[keep], sub))


@pytest.mark.parametrize("engine_name", ["dp", "bp", "enum", "rej", "hard", "stoch"])
def test_engines_no_grad_and_shift_invariant(addition_batch, engine_name):
    program, logits, y = addition_batch(1, batch=3, seed=4)
    make = {
        "dp": lambda: AdditionDP(program),
        "bp": lambda: BeliefPropagation(program),
        "enum": lambda: Enumeration(program),
        "rej": lambda: RejectionSampling(program, 256, generator=0),
        "hard": lambda: HardEM(AdditionDP(program)),
        "stoch": lambda: StochasticEM(AdditionDP(program), n=8, generator=0),
    }[engine_name]
    lg = logits.clone().requires_grad_(True)
    post = make().posterior(lg, y)
    assert not post.marginals.requires_grad
    shift = torch.randn(3, 2, 1, dtype=torch.float64) * 10
    post2 = make().posterior(logits + shift, y)
    torch.testing.assert_close(post.marginals, post2.marginals, atol=1e-10, rtol=0)
    assert torch.equal(post.valid, post2.valid)


def test_em_loss_from_samples_matches_soft_targets_for_factorised_model(addition_batch):
    program, logits, y = addition_batch(2, batch=3, seed=6)
    post = RejectionSampling(program, 512, generator=1).posterior(logits, y)
    a = logits.clone().requires_grad_(True)

    def log_prob(z):
        lp = a.log_softmax(-1)  # (B, n, K); z: (B, S, n)
        return lp.gather(2, z.permute(0, 2, 1)).sum(1)

    b = logits.clone().requires_grad_(True)
    torch.testing.assert_close(em_loss_from_samples(log_prob, post), em_loss(b, post))


def test_dp_handles_fifty_digits_without_underflow():
    program = MultiDigitAddition(50)
    digits = np.random.default_rng(0).integers(0, 10, (2, 100))
    y = torch.from_numpy(program.sum_digits(digits))
    logits = 8.0 * torch.randn(2, 100, 10, generator=torch.Generator().manual_seed(0))
    post = AdditionDP(program).posterior(logits, y)
    assert post.valid.all()
    assert torch.isfinite(post.marginals).all()
    torch.testing.assert_close(post.marginals.sum(-1), torch.ones(2, 100))
