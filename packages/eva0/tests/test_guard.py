"""The label-free collapse guard and its use inside EVA-0."""

import math

import pytest
import torch

from eva0 import EVA0
from eva0.guard import CollapseGuard


def _uniform(B=16, C=10):
    return torch.full((B, C), 1.0 / C)


def _one_class(B=16, C=10):
    p = torch.full((B, C), 1e-6)
    p[:, 0] = 1.0
    return p / p.sum(1, keepdim=True)


def test_references_are_the_warmup_means():
    g = CollapseGuard(0.1, warmup=2)
    assert not g.observe(_uniform(), 1.0)
    assert not g.observe(_uniform(), 2.0)
    assert g.ref_loss == pytest.approx(1.5)
    assert g.ref_diversity == pytest.approx(math.log(10))


def test_collapse_triggers_a_reset_and_then_freezes():
    g = CollapseGuard(0.1, warmup=1, momentum=1.0, max_resets=2)
    g.observe(_uniform(), 1.0)
    assert g.observe(_one_class(), 1.0)  # marginal entropy ln 10 -> ~0
    assert g.resets == 1
    assert not g.frozen
    assert not g.observe(_uniform(), 1.0)  # running means were put back to the references
    assert g.observe(_one_class(), 1.0)
    assert g.frozen


def test_loss_rise_triggers_only_beyond_the_tolerance():
    g = CollapseGuard(0.1, warmup=1, momentum=1.0)
    g.observe(_uniform(), 1.0)
    assert not g.observe(_uniform(), 1.0 + 0.09 * math.log(10))
    assert g.observe(_uniform(), 1.0 + 0.11 * math.log(10))


def test_guard_rejects_bad_arguments():
    with pytest.raises(ValueError, match="tolerance must be > 0"):
        CollapseGuard(0.0)
    with pytest.raises(ValueError, match="warmup and max_resets must be >= 1"):
        CollapseGuard(0.1, warmup=0)
    with pytest.raises(ValueError, match=r"momentum must be in \(0, 1\]"):
        CollapseGuard(0.1, momentum=0.0)


def test_eva0_guard_puts_theta_back_to_the_anchor_and_stops(make_mlp):
    net = make_mlp()
    a = EVA0(net, lr=5.0, max_step=None, anchor_weight=0.0, guard=0.01)
    a.guard = CollapseGuard(0.01, warmup=1, momentum=1.0, max_resets=1)
    x = torch.randn(16, 6, generator=torch.Generator().manual_seed(0))
    for t in range(12):
        a(torch.roll(x, t, 0))
        if a.stats.frozen:
            break
    assert a.stats.resets == 1
    assert a.stats.frozen
    assert a.drift() == 0.0  # reset to the source anchor
    before = a.stats.updates
    a(x)
    assert a.stats.updates == before  # no more updates once frozen
    assert a.drift() == 0.0
    a.reset()
    assert not a.stats.frozen
    assert not a.guard.frozen


def test_guard_none_never_resets(make_mlp):
    a = EVA0(make_mlp(), lr=5.0, max_step=None, anchor_weight=0.0, guard=None)
    x = torch.randn(16, 6, generator=torch.Generator().manual_seed(0))
    for t in range(12):
        a(torch.roll(x, t, 0))
    assert a.stats.resets == 0
    assert a.stats.updates == 12


def test_guard_leaves_the_update_unchanged_where_it_does_not_trigger(make_mlp):
    x = torch.randn(16, 6, generator=torch.Generator().manual_seed(0))
    guarded, plain = make_mlp(), make_mlp()
    a = EVA0(guarded, lr=0.01, guard=0.05)
    b = EVA0(plain, lr=0.01, guard=None)
    for t in range(12):  # a benign stream: one batch, rolled; small steps
        torch.testing.assert_close(a(torch.roll(x, t, 0)), b(torch.roll(x, t, 0)), rtol=0, atol=0)
    assert a.stats.resets == 0
    assert not a.stats.frozen
    assert a.stats.updates == b.stats.updates == 12
    for p, q in zip(a.params, b.params, strict=True):
        assert torch.equal(p, q)  # bit for bit: the guard only watches
    assert a.drift() > 0
