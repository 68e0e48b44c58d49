import pytest
import torch

from _eris_helpers import make_mlp
from eris_fl import ERISConfig, LocalTrainer, assign, flatten, run_simulation
from eris_fl.params import num_state


def test_flatten_assign_round_trip():
    model = make_mlp()
    vec = flatten(model)
    assert vec.shape == (num_state(model),)
    other = make_mlp(seed=1)
    assign(other, vec)
    torch.testing.assert_close(flatten(other), vec, rtol=0, atol=0)


def test_assign_copies_never_aliases():
    """Regression: vector_to_parameters aliases, so training after it mutates x_t."""
    model = make_mlp()
    x_t = flatten(model).clone()
    keep = x_t.clone()
    assign(model, x_t)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 6, dtype=torch.float64)).pow(2).sum().backward()
        opt.step()
    assert not torch.equal(flatten(model), keep)  # the model trained
    torch.testing.assert_close(x_t, keep, rtol=0, atol=0)  # x_t untouched
    x_t.add_(1.0)
    assert not torch.equal(flatten(model), x_t)  # and the reverse direction too


def test_trainer_does_not_mutate_global_state():
    model = make_mlp()
    x_t = flatten(model)
    keep = x_t.clone()
    X, y = torch.randn(20, 6, dtype=torch.float64), torch.randint(0, 3, (20,))
    u = LocalTrainer(batch_size=4).update(model, x_t, (X, y), torch.Generator().manual_seed(0))
    torch.testing.assert_close(x_t, keep, rtol=0, atol=0)
    assert u.abs().sum() > 0


def test_frozen_parameters_excluded_when_trainable_only():
    model = make_mlp()
    model[0].weight.requires_grad_(False)
    full = flatten(model, trainable_only=False)
    trainable = flatten(model, trainable_only=True)
    assert full.numel() - trainable.numel() == model[0].weight.numel()


def test_batchnorm_buffers_are_averaged():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).double()
    gen = torch.Generator().manual_seed(1)
    data = [
        (torch.randn(8, 4, generator=gen, dtype=torch.float64) + k, torch.randint(0, 3, (8,)))
        for k in range(3)
    ]
    x0 = flatten(model)
    means = []
    for X, _y in data:  # each client's one full-batch step, run by hand
        m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).double()
        assign(m, x0)
        m.train()
        m(X)
        means.append(m[1].running_mean.clone())
    run_simulation(
        model, data, ERISConfig(num_aggregators=2), 1, trainer=LocalTrainer(batch_size=8)
    )
    torch.testing.assert_close(model[1].running_mean, sum(means) / 3)


def test_assign_rejects_wrong_length():
    model = make_mlp()
    with pytest.raises(ValueError, match="model size"):
        assign(model, torch.zeros(3, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        assign(model, [0.0] * num_state(model))
