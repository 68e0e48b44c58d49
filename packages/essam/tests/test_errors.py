"""Every documented bad input raises a clear ValueError/TypeError."""

import math

import pytest
import torch

from essam import ESSAM


def _p():
    return [torch.nn.Parameter(torch.zeros(3))]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"population_size": 1}, "population_size must be >= 2"),
        ({"population_size": 5, "antithetic": True}, "even with antithetic"),
        ({"population_size": 2.5}, "population_size must be an int"),
        ({"sigma": 0.0}, "sigma must be a number > 0"),
        ({"sigma": -1.0}, "sigma must be a number > 0"),
        ({"lr": 0.0}, "lr must be a number > 0"),
        ({"rho": -0.1}, "rho must be 'auto' or a number >= 0"),
        ({"rho": "big"}, "rho must be 'auto'"),
        ({"variant": "fast"}, "variant must be one of"),
        ({"shaping": "softmax"}, "shaping must be one of"),
        ({"noise": "uniform"}, "noise must be one of"),
        ({"sam_refresh": -1}, "sam_refresh must be"),
        ({"weight_decay": -1.0}, "weight_decay must be"),
        ({"seed": -3}, "seed must be"),
    ],
)
def test_bad_hyperparameters(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ESSAM(_p(), **kwargs)


def test_no_parameters_selected():
    with pytest.raises(ValueError, match="selected no parameter"):
        ESSAM([torch.nn.Parameter(torch.zeros(2), requires_grad=False)])
    with pytest.raises(ValueError, match="empty parameter list"):
        ESSAM([])


def test_meta_device():
    with pytest.raises(ValueError, match="meta"):
        ESSAM([torch.nn.Parameter(torch.zeros(2, device="meta"))])


def test_missing_closure():
    opt = ESSAM(_p(), population_size=2)
    with pytest.raises(TypeError, match="needs a closure"):
        opt.step()


@pytest.mark.parametrize(
    ("value", "exc", "match"),
    [
        (math.nan, ValueError, r"population member 0\) returned a non-finite"),
        (float("inf"), ValueError, "non-finite"),
        (torch.ones(3), TypeError, "must return a scalar"),
        ("1.0", TypeError, "must return a float"),
    ],
)
def test_bad_closure_values_restore_theta(value, exc, match):
    params = _p()
    opt = ESSAM(params, sigma=0.1, rho=0.1, population_size=2)
    with pytest.raises(exc, match=match):
        opt.step(lambda: value)
    # restored up to the rounding of theta + sigma*eps - sigma*eps
    torch.testing.assert_close(params[0].detach(), torch.zeros(3), rtol=0, atol=1e-6)


def test_nan_in_update_population_restores_theta_after_sam_move():
    params = _p()
    calls = []

    def closure():
        calls.append(1)
        return float(len(calls)) if len(calls) <= 4 else math.nan

    opt = ESSAM(params, sigma=0.1, rho=0.5, population_size=4)
    with pytest.raises(ValueError, match="population member 0"):
        opt.step(closure)
    torch.testing.assert_close(params[0].detach(), torch.zeros(3), rtol=0, atol=1e-6)


def test_trainer_without_tokenizer_is_a_clear_error():
    pytest.importorskip("transformers")
    from essam import ESSAMTrainer
    from essam.baselines import MinimalGRPO
    from essam.rollout import generate

    model = torch.nn.Linear(2, 2)
    rows = [{"prompt": "1+1=", "answer": 2}]
    with pytest.raises(ValueError, match="needs processing_class"):
        ESSAMTrainer(model, lambda **kw: [0.0], rows)
    with pytest.raises(TypeError, match="tokenizer=None"):
        generate(model, None, ["1+1="])
    with pytest.raises(TypeError, match="tokenizer=None"):
        MinimalGRPO(model, None, lambda **kw: [0.0])
    with pytest.raises(TypeError, match="reward_funcs must be callables, got int"):
        MinimalGRPO(model, object(), [lambda **kw: [0.0], 3])

    class OwnBackend(ESSAMTrainer):  # a custom generate needs no tokenizer
        def generate(self, prompts):
            return ["2"] * len(prompts)

    assert OwnBackend(model, lambda **kw: [1.0], rows).evaluate(rows)["accuracy"] == 1.0
