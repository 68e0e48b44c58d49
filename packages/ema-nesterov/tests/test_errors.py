"""Bad input raises clear errors."""

import copy
import math

import pytest
import torch

from ema_nesterov import BetaScheduler, EMANesterov, Lookahead, wsd_lookahead_schedule


def _sgd(*shapes, dtype=torch.float32):
    return torch.optim.SGD([torch.nn.Parameter(torch.ones(s, dtype=dtype)) for s in shapes], lr=0.1)


@pytest.mark.parametrize("gamma", [-0.1, 1.0, 1.5, math.nan, math.inf])
def test_gamma_out_of_range(gamma):
    with pytest.raises(ValueError, match="gamma must be a finite number in"):
        EMANesterov(_sgd(2), gamma=gamma)


@pytest.mark.parametrize("beta", [-1.0, math.nan, math.inf])
def test_beta_negative_or_non_finite(beta):
    with pytest.raises(ValueError, match="beta must be a finite number >= 0"):
        EMANesterov(_sgd(2), beta=beta)


def test_group_value_checked_at_step():
    opt = EMANesterov(_sgd(2))
    opt.param_groups[0]["ema_gamma"] = 1.0
    with pytest.raises(ValueError, match="ema_gamma"):
        opt.step()


@pytest.mark.parametrize("value", [-1.0, math.nan])
def test_schedule_returning_bad_values(value):
    with pytest.raises(ValueError, match="beta_schedule"):
        EMANesterov(_sgd(2), beta_schedule=lambda step: value)


def test_schedule_not_callable():
    with pytest.raises(TypeError, match="beta_schedule must be callable"):
        EMANesterov(_sgd(2), beta_schedule=0.5)


def test_base_not_an_optimizer():
    with pytest.raises(TypeError, match=r"torch\.optim\.Optimizer"):
        EMANesterov([torch.nn.Parameter(torch.ones(2))])
    with pytest.raises(TypeError, match=r"torch\.optim\.Optimizer"):
        EMANesterov(42)


def test_empty_sequence():
    with pytest.raises(ValueError, match="empty"):
        EMANesterov([])


def test_overlapping_bases():
    w = torch.nn.Parameter(torch.ones(2, 2))
    with pytest.raises(ValueError, match="share a parameter"):
        EMANesterov([torch.optim.SGD([w], lr=0.1), torch.optim.Adam([w])])


def test_wrapping_a_wrapper():
    inner = EMANesterov(_sgd(2))
    with pytest.raises(TypeError, match="already a EMANesterov"):
        EMANesterov(inner)
    with pytest.raises(TypeError, match="already a Lookahead"):
        Lookahead(Lookahead(_sgd(2)))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_memory_efficient_low_precision(dtype):
    with pytest.raises(ValueError, match="float32/float64"):
        EMANesterov(_sgd(2, dtype=dtype), memory_efficient=True)


def test_step_in_eval_mode():
    opt = EMANesterov(_sgd(2)).eval()
    with pytest.raises(RuntimeError, match="eval mode"):
        opt.step()


def test_load_state_dict_mismatches():
    opt = EMANesterov(_sgd(2, 3))
    sd = copy.deepcopy(opt.state_dict())
    with pytest.raises(ValueError, match="parameters"):
        EMANesterov(_sgd(2)).load_state_dict(sd)
    with pytest.raises(ValueError, match="shape"):
        EMANesterov(_sgd(2, 4)).load_state_dict(sd)
    adam = torch.optim.Adam([torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(3))])
    with pytest.raises(ValueError, match="base optimizers"):
        EMANesterov(adam).load_state_dict(sd)
    with pytest.raises(ValueError, match="keys"):
        EMANesterov(_sgd(2, 3)).load_state_dict({"state": {}})


def _stepped(*shapes):
    opt = EMANesterov(_sgd(*shapes))
    for p in opt.param_groups[0]["params"]:
        p.grad = torch.ones_like(p)
    opt.step()
    return opt


@pytest.mark.parametrize(
    ("corrupt", "match"),
    [
        (lambda sd: sd["ema"].pop("config"), r"lacks \['config'\]"),
        (lambda sd: sd["ema"]["config"].pop("shapes"), r"\['config'\] lacks \['shapes'\]"),
        (lambda sd: sd["ema"].__setitem__("config", None), "must be a dict"),
        (lambda sd: sd["ema"]["beta_applied"].append(1.0), "parameter groups"),
        (lambda sd: sd["ema"]["state"][0].pop("m"), r"\['state'\]\[0\] must hold 'm'"),
        (lambda sd: sd["ema"]["state"].__setitem__(1, {"m": torch.ones(7)}), "of shape"),
    ],
)
def test_truncated_or_corrupt_checkpoint_names_what_is_wrong(corrupt, match):
    sd = copy.deepcopy(_stepped(2, 3).state_dict())
    corrupt(sd)
    with pytest.raises(ValueError, match=match):
        EMANesterov(_sgd(2, 3)).load_state_dict(sd)


def test_sparse_gradients():
    emb = torch.nn.Embedding(5, 2, sparse=True)
    opt = EMANesterov(torch.optim.SGD(emb.parameters(), lr=0.1))
    emb(torch.tensor([1, 2])).sum().backward()
    with pytest.raises(RuntimeError, match="sparse"):
        opt.step()


def test_add_param_group_needs_base_index_with_several_bases():
    a = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
    b = torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
    opt = EMANesterov([a, b])
    with pytest.raises(ValueError, match="base_index is required"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.ones(1))]})
    with pytest.raises(ValueError, match="base_index must be in"):
        opt.add_param_group({"params": [torch.nn.Parameter(torch.ones(1))]}, base_index=2)


def test_schedule_arguments():
    with pytest.raises(ValueError, match="warmup_steps \\+ decay_steps"):
        wsd_lookahead_schedule(10, 6, 5)
    with pytest.raises(ValueError, match="total_steps must be an int"):
        wsd_lookahead_schedule(-1, 0, 0)


def test_beta_scheduler_arguments():
    with pytest.raises(TypeError, match="EMANesterov"):
        BetaScheduler(_sgd(2), lambda e: 1.0)
    opt = EMANesterov(_sgd(2))
    with pytest.raises(ValueError, match="expected 1 functions"):
        BetaScheduler(opt, [lambda e: 1.0, lambda e: 1.0])
    with pytest.raises(ValueError, match="finite >= 0"):
        BetaScheduler(opt, lambda e: -1.0)


@pytest.mark.parametrize(
    ("k", "alpha", "match"), [(0, 0.5, "k must be"), (5, 0.0, "alpha must be")]
)
def test_lookahead_arguments(k, alpha, match):
    with pytest.raises(ValueError, match=match):
        Lookahead(_sgd(2), k=k, alpha=alpha)
