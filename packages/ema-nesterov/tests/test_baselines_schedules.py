"""Lookahead against its definition; schedules and BetaScheduler."""

import copy

import pytest
import torch

from ema_nesterov import (
    BetaScheduler,
    EMANesterov,
    Lookahead,
    constant_schedule,
    wsd_lookahead_schedule,
)
from reference import lookahead_iterates


def test_lookahead_matches_reference_recurrence():
    k, alpha, lr = 3, 0.4, 0.1
    lam = torch.linspace(0.5, 2.0, 4, dtype=torch.float64)
    p = torch.nn.Parameter(torch.ones(4, dtype=torch.float64))
    opt = Lookahead(torch.optim.SGD([p], lr=lr), k=k, alpha=alpha)
    for fast, slow in lookahead_iterates(lam, lr, k, alpha, 12):
        p.grad = lam * p.detach()
        opt.step()
        torch.testing.assert_close(p.detach(), fast, rtol=1e-14, atol=1e-15)
        torch.testing.assert_close(opt.state[p]["slow"], slow, rtol=1e-14, atol=1e-15)


def test_lookahead_eval_uses_slow_weights_and_train_restores(h):
    model = h.make_mlp()
    opt = Lookahead(torch.optim.Adam(model.parameters(), lr=1e-2), k=5)
    h.train(model, opt, h.batches(7))
    fast = [p.detach().clone() for p in model.parameters()]
    opt.eval()
    for p in model.parameters():
        assert torch.equal(p.detach(), opt.state[p]["slow"])
    opt.train()
    assert all(torch.equal(p, f) for p, f in zip(model.parameters(), fast, strict=True))


def test_lookahead_matches_timm():
    """Same update as timm's Lookahead once both start the slow weights at theta_0.

    timm creates its slow buffer lazily at the first sync, from the fast weights of step k, so
    its first sync is a no-op; Zhang et al. (and ours) start the slow weights at theta_0. The
    test seeds timm's buffer with theta_0 and then asks for agreement at every step.
    """
    timm_optim = pytest.importorskip("timm.optim")
    a = torch.nn.Parameter(torch.linspace(-1, 1, 5))
    b = torch.nn.Parameter(a.detach().clone())
    ours = Lookahead(torch.optim.SGD([a], lr=0.1, momentum=0.9), k=5, alpha=0.5)
    ref = timm_optim.Lookahead(torch.optim.SGD([b], lr=0.1, momentum=0.9), k=5, alpha=0.5)
    ref._base_optimizer.state[b]["lookahead_slow_buff"] = b.detach().clone()
    for _ in range(12):
        a.grad, b.grad = a.detach() ** 3, b.detach() ** 3
        ours.step()
        ref.step()
        torch.testing.assert_close(a.detach(), b.detach())


def test_lookahead_checkpoint_round_trip(h):
    data = h.batches(12)
    model = h.make_mlp()
    opt = Lookahead(torch.optim.AdamW(model.parameters(), lr=1e-2), k=5)
    h.train(model, opt, data[:6])
    ckpt = copy.deepcopy((model.state_dict(), opt.state_dict()))
    h.train(model, opt, data[6:])
    model2 = h.make_mlp(seed=1)
    model2.load_state_dict(ckpt[0])
    opt2 = Lookahead(torch.optim.AdamW(model2.parameters(), lr=1e-2), k=5)
    opt2.load_state_dict(ckpt[1])
    h.train(model2, opt2, data[6:])
    assert all(
        torch.equal(p, q) for p, q in zip(model.parameters(), model2.parameters(), strict=True)
    )


def test_wsd_schedule_phases():
    f = wsd_lookahead_schedule(10, 2, 3)
    assert [f(t) for t in range(10)] == [0, 0, 1, 1, 1, 1, 1, 0, 0, 0]
    assert constant_schedule(0.5)(123) == 0.5
    with pytest.raises(ValueError, match="value must be"):
        constant_schedule(-1.0)


def test_beta_scheduler_sets_beta_and_keeps_theta():
    w = torch.nn.Parameter(torch.linspace(0, 1, 4, dtype=torch.float64))
    opt = EMANesterov(torch.optim.SGD([w], lr=0.1), gamma=0.5, beta=2.0)
    sched = BetaScheduler(opt, lambda e: 0.5**e)
    assert opt.param_groups[0]["ema_beta"] == 2.0
    for epoch in range(1, 5):
        w.grad = w.detach().clone()
        opt.step()
        theta = w.detach() - opt.param_groups[0]["_ema_beta_applied"] * opt.state[w]["m"]
        sched.step()
        assert opt.param_groups[0]["ema_beta"] == pytest.approx(2.0 * 0.5**epoch)
        assert opt.param_groups[0]["_ema_beta_applied"] == pytest.approx(2.0 * 0.5**epoch)
        new_theta = w.detach() - opt.param_groups[0]["_ema_beta_applied"] * opt.state[w]["m"]
        torch.testing.assert_close(new_theta, theta, rtol=1e-14, atol=1e-15)
    assert sched.state_dict() == {"last_epoch": 4}
    sched.load_state_dict({"last_epoch": 1})
    assert sched.last_epoch == 1
