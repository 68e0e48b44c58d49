import copy

import numpy as np
import pytest
import torch

from eva_cap import (
    GrammarDecomposer,
    GRPOConfig,
    GRPOTrainer,
    group_advantages,
    grpo_token_loss,
    trl_reward_funcs,
)
from eva_cap.grpo import LOSS_TYPES
from reference import advantages_reference, grpo_loss_reference


def _inputs(seed=0, N=6, T=5):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(N, T, 7, generator=g, dtype=torch.float64)
    tok = torch.randint(0, 7, (N, T), generator=g)
    logp_all = torch.log_softmax(logits, -1)
    logp = logp_all.gather(-1, tok[..., None]).squeeze(-1)
    old = logp.detach() + 0.3 * torch.randn(N, T, generator=g, dtype=torch.float64)
    ref = logp.detach() + 0.5 * torch.randn(N, T, generator=g, dtype=torch.float64)
    adv = torch.randn(N, generator=g, dtype=torch.float64)
    mask = torch.ones(N, T, dtype=torch.long)
    for i in range(N):
        mask[i, 1 + i % (T - 1) :] = 0
    return logits, tok, logp, old, ref, adv, mask


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_loss_matches_the_per_sequence_loop(loss_type, beta):
    _, _, logp, old, ref, adv, mask = _inputs()
    cfg = GRPOConfig(loss_type=loss_type, beta=beta, epsilon=0.2, epsilon_high=0.28,
                     max_completion_length=5)  # fmt: skip
    loss, _ = grpo_token_loss(logp, old, ref, adv, mask, cfg)
    want = grpo_loss_reference(logp, old, ref, adv, mask, 0.2, 0.28, beta, loss_type, 5)
    assert float(loss) == pytest.approx(float(want), abs=1e-6)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_gradient_equals_autograd_of_the_reference(loss_type):
    logits, tok, _, old, ref, adv, mask = _inputs(1)
    cfg = GRPOConfig(loss_type=loss_type, beta=0.04, max_completion_length=5)
    grads = []
    for fn in ("fast", "ref"):
        x = logits.clone().requires_grad_(True)
        logp = torch.log_softmax(x, -1).gather(-1, tok[..., None]).squeeze(-1)
        if fn == "fast":
            loss = grpo_token_loss(logp, old, ref, adv, mask, cfg)[0]
        else:
            loss = grpo_loss_reference(logp, old, ref, adv, mask, 0.2, 0.2, 0.04, loss_type, 5)
        (g,) = torch.autograd.grad(loss, x)
        grads.append(g)
    torch.testing.assert_close(grads[0], grads[1], atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_on_policy_no_kl_gradient_is_reinforce(loss_type):
    logits, tok, *_, adv, mask = _inputs(2)
    cfg = GRPOConfig(loss_type=loss_type, beta=0.0, max_completion_length=5)
    x = logits.clone().requires_grad_(True)
    logp = torch.log_softmax(x, -1).gather(-1, tok[..., None]).squeeze(-1)
    loss, _ = grpo_token_loss(logp, logp.detach(), None, adv, mask, cfg)
    (g,) = torch.autograd.grad(loss, x)
    m = mask.double()
    if loss_type == "grpo":
        w = m / m.sum(1, keepdim=True) / m.shape[0]
    elif loss_type == "dr_grpo":
        w = m / (m.shape[0] * 5)
    else:
        w = m / m.sum()
    x2 = logits.clone().requires_grad_(True)
    logp2 = torch.log_softmax(x2, -1).gather(-1, tok[..., None]).squeeze(-1)
    (g2,) = torch.autograd.grad(-(adv[:, None] * logp2 * w).sum(), x2)  # -sum_t A_i grad logp
    torch.testing.assert_close(g, g2, atol=1e-12, rtol=1e-9)


def test_kl_is_nonnegative_and_zero_at_the_reference():
    _, _, logp, old, ref, adv, mask = _inputs(3)
    cfg = GRPOConfig(beta=1.0)
    assert grpo_token_loss(logp, old, ref, adv, mask, cfg)[1]["kl"] > 0
    assert grpo_token_loss(logp, old, logp.detach(), adv, mask, cfg)[1]["kl"] == 0.0


def test_clipping_inactive_inside_the_trust_region():
    _, _, logp, _, _, adv, mask = _inputs(4)
    cfg = GRPOConfig(beta=0.0, epsilon=0.2, epsilon_high=0.3)
    old = logp.detach() - torch.empty_like(logp).uniform_(-0.17, 0.25)  # rho in [0.84, 1.28]
    loss, stats = grpo_token_loss(logp, old, None, adv, mask, cfg)
    rho = torch.exp(logp - old)
    plain = -(rho * adv[:, None] * mask).sum() / mask.sum()
    assert stats["clip_ratio"] == 0.0
    assert float(loss) == pytest.approx(float(plain), abs=1e-12)
    far = logp.detach() - 1.0  # rho = e: clipped wherever A > 0
    assert grpo_token_loss(logp, far, None, adv, mask, cfg)[1]["clip_ratio"] > 0


def test_group_advantages_properties():
    r = np.random.default_rng(0).normal(size=32)
    a = group_advantages(r, 8).reshape(4, 8)
    np.testing.assert_allclose(a.mean(1), 0, atol=1e-12)
    np.testing.assert_allclose(a.std(1, ddof=1), 1, atol=1e-3)
    assert np.all(group_advantages(np.ones(16), 8) == 0)
    for scale in ("group", "batch", "none"):
        np.testing.assert_allclose(group_advantages(r, 8, scale), advantages_reference(r, 8, scale),
                                   atol=1e-12)  # fmt: skip


def test_group_advantages_trl_example():
    # TRL: A = (r - mean_g) / (std_g + 1e-4), std with Bessel correction; values by hand
    r = [1.0, 0.0, 0.5, 0.5, 0.0, 1.0, 1.0, 1.0]
    want = [0.707007, -0.707007, 0.0, 0.0, -0.707007, 0.707007, 0.0, 0.0]
    np.testing.assert_allclose(group_advantages(r, 2), want, atol=1e-6)


def test_group_advantages_ignore_nan():
    a = group_advantages([1.0, np.nan, 0.0, 1.0], 4)
    want = advantages_reference([1.0, 0.0, 1.0], 3, "group")
    np.testing.assert_allclose(a[[0, 2, 3]], want, atol=1e-12)
    assert a[1] == 0.0


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"num_generations": 1}, "num_generations"), ({"epsilon": 0.0}, "epsilon"),
     ({"beta": -0.1}, "beta"), ({"loss_type": "ppo"}, "loss_type"),
     ({"scale_rewards": "std"}, "scale_rewards"), ({"temperature": 0.0}, "temperature"),
     ({"multi_objective_aggregation": "mean"}, "multi_objective_aggregation")],
)  # fmt: skip
def test_config_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        GRPOConfig(**kw)


def test_advantage_errors():
    with pytest.raises(ValueError, match="G must be >= 2"):
        group_advantages([1.0, 2.0], 1)
    with pytest.raises(ValueError, match="divisible by G"):
        group_advantages([1.0, 2.0, 3.0], 2)
    with pytest.raises(ValueError, match="scale"):
        group_advantages([1.0, 2.0], 2, "std")


def test_reward_weights_length_error(tiny):
    with pytest.raises(ValueError, match="reward_weights has 2 entries for 1"):
        GRPOTrainer(tiny, None, lambda **kw: [0.0], GRPOConfig(reward_weights=[1.0, 1.0]))


def _step(tiny, batch, **kw):
    dec = GrammarDecomposer()
    cfg = GRPOConfig(num_generations=4, max_completion_length=12, seed=3, **kw)
    funcs = (
        trl_reward_funcs(dec, components=True) if "reward_weights" in kw else trl_reward_funcs(dec)
    )
    tr = GRPOTrainer(tiny, copy.deepcopy(tiny), funcs, cfg,
                     metric_funcs=trl_reward_funcs(dec, components=True))  # fmt: skip
    sub = {k: v[:3] for k, v in batch.items()}
    return tr.step(sub), tiny


def test_one_step_is_deterministic(tiny, batch):
    a, m1 = _step(copy.deepcopy(tiny), batch)
    b, m2 = _step(copy.deepcopy(tiny), batch)
    assert a == b
    for p, q in zip(m1.parameters(), m2.parameters(), strict=False):
        assert torch.equal(p, q)
    assert {"kl", "clip_ratio", "zero_std_fraction", "metric/eva_sync"} <= set(a)


def test_step_changes_the_policy_and_supports_normalize_then_sum(tiny, batch):
    before = [p.detach().clone() for p in tiny.parameters()]
    logs, m = _step(tiny, batch, multi_objective_aggregation="normalize_then_sum",
                    reward_weights=[1.0, 1.0, 1.0, 0.0], num_iterations=2)  # fmt: skip
    assert any(not torch.equal(p, q) for p, q in zip(before, m.parameters(), strict=False))
    assert np.isfinite(logs["loss"])
