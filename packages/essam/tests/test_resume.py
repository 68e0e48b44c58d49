"""The seed is part of the optimizer state: a resumed run continues bit for bit."""

import copy
import io

import pytest
import torch

from essam import ESSAM

KW = {"sigma": 0.05, "lr": 0.02, "rho": 0.2, "population_size": 6}


def _save_load(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


@pytest.mark.parametrize("variant", ["standard", "accelerated", "es"])
def test_resume_under_another_constructor_seed_continues_bit_for_bit(toy_cls, variant):
    ref = toy_cls()
    opt = ESSAM(ref.params, variant=variant, seed=7, **KW)
    for _ in range(2):
        opt.step(ref.closure)
    saved = _save_load({"opt": opt.state_dict(), "theta": [p.detach().clone() for p in ref.params]})
    for _ in range(3):
        opt.step(ref.closure)
    assert saved["opt"]["state"]["essam"]["seed"] == 7
    new = toy_cls()
    with torch.no_grad():
        for p, t in zip(new.params, saved["theta"], strict=True):
            p.copy_(t)
    resumed = ESSAM(new.params, variant=variant, seed=123, **KW)  # the saved seed wins
    resumed.load_state_dict(saved["opt"])
    for _ in range(3):
        resumed.step(new.closure)
    assert torch.equal(new.flat(), ref.flat())
    assert resumed.state_dict()["state"]["essam"]["seed"] == 7


def test_state_without_seed_or_from_another_run_is_refused(toy_cls):
    toy = toy_cls()
    opt = ESSAM(toy.params, **KW)
    opt.step(toy.closure)
    old = copy.deepcopy(opt.state_dict())
    del old["state"]["essam"]["seed"]
    with pytest.raises(ValueError, match="holds no seed"):
        ESSAM(toy_cls().params, **KW).load_state_dict(old)
    other = ESSAM(toy_cls().params, **{**KW, "population_size": 8})
    with pytest.raises(ValueError, match="population_size=6, this optimizer has population_size=8"):
        other.load_state_dict(opt.state_dict())
    with pytest.raises(ValueError, match="variant='standard'"):
        ESSAM(toy_cls().params, variant="accelerated", **KW).load_state_dict(opt.state_dict())
