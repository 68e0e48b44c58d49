"""The benchmark's forward-passes-to-target helper (bench/zo_target.py)."""

import pytest
import torch
from zo_target import forward_passes_to_target

from engine_zo import MeZO


def _model():
    torch.manual_seed(0)
    return torch.nn.Linear(4, 1, bias=False)


X = torch.eye(4)
Y = torch.ones(4, 1)


def _loss(model):
    return ((model(X) - Y) ** 2).mean()


def test_reaches_target_at_an_evaluation_point():
    run = forward_passes_to_target(lambda p: MeZO(p, lr=0.1, seed=0), _model, _loss, 0.05, 4000, 20)
    assert run.forward_passes is not None
    assert run.forward_passes % 20 == 0
    assert run.curve[0][0] == 0
    assert run.final_loss <= 0.05
    assert [fp for fp, _ in run.curve] == list(range(0, run.forward_passes + 1, 20))


def test_budget_exhausted_returns_none():
    run = forward_passes_to_target(lambda p: MeZO(p, lr=1e-4, seed=0), _model, _loss, 1e-6, 40, 20)
    assert run.forward_passes is None
    assert run.curve[-1][0] == 40


def test_divergence_is_reported():
    run = forward_passes_to_target(
        lambda p: MeZO(p, lr=1e20, seed=0), _model, _loss, 1e-6, 2000, 20
    )
    assert run.forward_passes is None
    assert run.diverged


def test_bad_budget():
    with pytest.raises(ValueError, match="budget"):
        forward_passes_to_target(lambda p: MeZO(p, lr=0.1), _model, _loss, 0.1, 0, 10)


def test_copied_noise_serves_fixed_copies_and_restores_randn():
    from noise_floor import CopiedNoise

    real = torch.randn
    with CopiedNoise():
        a = torch.randn((3, 4), generator=torch.Generator().manual_seed(1))
        a.mul_(0.0)  # a caller writing into its draw must not change the next one
        b = torch.randn(3, 4)
        c = torch.randn((), dtype=torch.float64)
        assert torch.equal(torch.randn([3, 4]), b)  # the same draw each time: a fixed workload
    assert torch.randn is real
    assert b.shape == (3, 4)
    assert torch.isfinite(b).all()
    assert b.abs().sum() > 0
    assert c.dtype == torch.float64
    assert c.shape == ()
