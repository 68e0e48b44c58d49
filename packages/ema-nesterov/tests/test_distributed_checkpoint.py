"""ema_nesterov.distributed in one process: DCP round trip of a plain model, and bad input."""

import pytest
import torch

from ema_nesterov import EMANesterov
from ema_nesterov.distributed import get_state_dict, set_state_dict


def _setup(h):
    model = h.make_mlp()
    opt = EMANesterov(torch.optim.AdamW(model.parameters(), lr=0.05), gamma=0.9, beta=0.5)
    return model, opt


def test_dcp_round_trip_single_process(h, tmp_path):
    dcp = pytest.importorskip("torch.distributed.checkpoint")
    data = h.batches(8)
    model, opt = _setup(h)
    h.train(model, opt, data)
    want = [p.detach().clone() for p in model.parameters()]

    model, opt = _setup(h)
    h.train(model, opt, data[:4])
    model_sd, optim_sd = get_state_dict(model, opt)
    assert set(optim_sd["ema"]["m"]) == {n for n, _ in model.named_parameters()}
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(tmp_path))
    model, opt = _setup(h)
    model_sd, optim_sd = get_state_dict(model, opt)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=str(tmp_path))
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    assert opt.state_dict()["ema"]["step"] == 4
    h.train(model, opt, data[4:])
    for p, w in zip(model.parameters(), want, strict=True):
        assert torch.equal(p.detach(), w)


def test_init_state_creates_zero_buffers_that_change_nothing(h):
    model, opt = _setup(h)
    before = [p.detach().clone() for p in model.parameters()]
    opt.init_state()
    for p, b in zip(model.parameters(), before, strict=True):
        assert torch.equal(opt.state[p]["m"], torch.zeros_like(p))
        assert torch.equal(opt.theta(p), b)


def test_bad_arguments(h):
    model, opt = _setup(h)
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module"):
        get_state_dict("model", opt)
    with pytest.raises(TypeError, match="opt must be an EMANesterov"):
        get_state_dict(model, opt.base_optimizers[0])
    model_sd, optim_sd = get_state_dict(model, opt)
    with pytest.raises(ValueError, match="exactly the keys 'base' and 'ema'"):
        set_state_dict(model, opt, model_state_dict=model_sd, optim_state_dict={"base": {}})
    bad = {"base": optim_sd["base"], "ema": {"m": {}}}
    with pytest.raises(ValueError, match=r"lacks \['step'"):
        set_state_dict(model, opt, model_state_dict=model_sd, optim_state_dict=bad)
    bad = {"base": optim_sd["base"], "ema": {**optim_sd["ema"], "m": {"nope": torch.zeros(1)}}}
    with pytest.raises(ValueError, match="names parameters not in the model"):
        set_state_dict(model, opt, model_state_dict=model_sd, optim_state_dict=bad)


def test_optimizer_parameters_outside_the_model(h):
    model, _ = _setup(h)
    extra = torch.nn.Parameter(torch.zeros(3))
    opt = EMANesterov(torch.optim.AdamW([*model.parameters(), extra], lr=0.1))
    with pytest.raises(ValueError, match=r"1 parameter\(s\) of opt are not parameters of model"):
        get_state_dict(model, opt)
