"""Drop-in behaviour: LR schedulers, hooks, GradScaler, closures, checkpoints."""

import copy

import pytest
import torch

from ema_nesterov import EMANesterov, wsd_lookahead_schedule


def _muon_pair(model):
    mats = [p for p in model.parameters() if p.ndim == 2]
    rest = [p for p in model.parameters() if p.ndim != 2]
    return [torch.optim.Muon(mats, lr=0.02), torch.optim.AdamW(rest, lr=1e-2)]


SETUPS = {
    "adamw_cosine": (
        lambda m: torch.optim.AdamW(m.parameters(), lr=1e-2),
        lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=20),
    ),
    "sgd_onecycle": (
        lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9),
        lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=20),
    ),
    "muon_adamw_lambda": (
        _muon_pair,
        lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: 1.0 / (1 + s)),
    ),
}


@pytest.mark.parametrize("name", list(SETUPS))
def test_checkpoint_resume_is_bitwise(name, h):
    make_base, make_sched = SETUPS[name]
    data = h.batches(20)

    def build():
        model = h.make_mlp()
        opt = EMANesterov(
            make_base(model), gamma=0.9, beta=1.0, beta_schedule=wsd_lookahead_schedule(20, 3, 4)
        )
        return model, opt, make_sched(opt)

    def run(model, opt, sched, chunk):
        for x, y in chunk:
            opt.zero_grad()
            h.mse(model, x, y).backward()
            opt.step()
            sched.step()

    ref = build()
    run(*ref, data)

    first = build()
    run(*first, data[:10])
    ckpt = copy.deepcopy(
        {
            "model": first[0].state_dict(),
            "opt": first[1].state_dict(),
            "sched": first[2].state_dict(),
        }
    )
    model, opt, sched = build()
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    sched.load_state_dict(ckpt["sched"])
    run(model, opt, sched, data[10:])
    for p, q in zip(ref[0].parameters(), model.parameters(), strict=True):
        assert torch.equal(p, q)


def test_groups_are_the_base_groups_and_schedulers_drive_base_lr():
    w = torch.nn.Parameter(torch.ones(3))
    base = torch.optim.AdamW([w], lr=1e-2)
    opt = EMANesterov(base, gamma=0.9, beta=1.0)
    assert opt.param_groups[0] is base.param_groups[0]
    assert opt.param_groups[0]["ema_gamma"] == 0.9
    assert opt.param_groups[0]["ema_beta"] == 1.0
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    w.grad = torch.ones(3)
    opt.step()
    sched.step()
    assert base.param_groups[0]["lr"] == pytest.approx(5e-3)


def test_onecycle_cycle_momentum_drives_adam_betas():
    w = torch.nn.Parameter(torch.ones(3))
    base = torch.optim.Adam([w], lr=1e-2)
    opt = EMANesterov(base)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=0.1, total_steps=10, cycle_momentum=True
    )
    first = base.param_groups[0]["betas"][0]
    for _ in range(5):
        w.grad = torch.ones(3)
        opt.step()
        sched.step()
    assert base.param_groups[0]["betas"][0] != first


def test_step_hooks_fire_once_per_step():
    w = torch.nn.Parameter(torch.ones(3))
    opt = EMANesterov(torch.optim.SGD([w], lr=0.1))
    calls = []
    opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
    opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
    for _ in range(3):
        w.grad = torch.ones(3)
        opt.step()
    assert calls == ["pre", "post"] * 3


def test_grad_scaler_skip_leaves_wrapper_state_untouched():
    model = torch.nn.Linear(4, 2)
    opt = EMANesterov(torch.optim.SGD(model.parameters(), lr=0.1), beta=1.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=4.0)
    x = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
    for _ in range(3):
        opt.zero_grad()
        scaler.scale(model(x).pow(2).mean()).backward()
        scaler.step(opt)
        scaler.update()
    params = [p.detach().clone() for p in model.parameters()]
    state = copy.deepcopy(opt.state_dict()["ema"])
    opt.zero_grad()
    scaler.scale(model(x).pow(2).mean()).backward()
    model.weight.grad[0, 0] = float("inf")
    scaler.step(opt)  # skipped: inf gradient
    scaler.update()
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), params, strict=True))
    after = opt.state_dict()["ema"]
    assert after["step"] == state["step"]
    for i in state["state"]:
        assert torch.equal(after["state"][i]["m"], state["state"][i]["m"])


def test_closure_is_evaluated_at_the_lookahead_point():
    w = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    opt = EMANesterov(torch.optim.SGD([w], lr=0.1), gamma=0.5, beta=2.0)
    for _ in range(3):
        w.grad = w.detach().clone()
        opt.step()
    seen = []

    def closure():
        seen.append(w.detach().clone())
        opt.zero_grad()
        loss = (w**2).sum()
        loss.backward()
        return loss

    y = w.detach().clone()
    loss = opt.step(closure)
    assert len(seen) == 1
    assert torch.equal(seen[0], y)
    assert float(loss.detach()) == pytest.approx(float((y**2).sum()))


def test_add_param_group_and_zero_grad():
    w = torch.nn.Parameter(torch.ones(2))
    v = torch.nn.Parameter(torch.ones(3))
    opt = EMANesterov(torch.optim.SGD([w], lr=0.1))
    opt.add_param_group({"params": [v], "lr": 0.01})
    assert len(opt.param_groups) == 2
    assert opt.param_groups[1] is opt.base_optimizers[0].param_groups[1]
    assert opt.param_groups[1]["ema_gamma"] == 0.9
    w.grad, v.grad = torch.ones(2), torch.ones(3)
    opt.step()
    theta_v = v.detach() - opt.param_groups[1]["_ema_beta_applied"] * opt.state[v]["m"]
    assert torch.allclose(theta_v, torch.full((3,), 0.99))  # lr 0.01 of the new group
    opt.zero_grad(set_to_none=True)
    assert w.grad is None
    assert v.grad is None
    with pytest.raises(ValueError, match="already optimized"):
        opt.add_param_group({"params": [v]})


def test_beta_schedule_zero_in_warmup_and_decay():
    w = torch.nn.Parameter(torch.ones(2, dtype=torch.float64))
    opt = EMANesterov(
        torch.optim.SGD([w], lr=0.1), beta=2.0, beta_schedule=wsd_lookahead_schedule(10, 2, 3)
    )
    applied = []
    for _ in range(10):
        w.grad = w.detach().clone()
        opt.step()
        applied.append(opt.param_groups[0]["_ema_beta_applied"])
    # beta applied before step t+1 is 2 * schedule(t+1)
    assert applied == [0.0, 2.0, 2.0, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0]


def test_repr_names_the_base():
    opt = EMANesterov(torch.optim.Adam([torch.nn.Parameter(torch.ones(1))]))
    text = repr(opt)
    assert text.startswith("EMANesterov(gamma=0.9, beta=1.0")
    assert "Adam" in text


def test_theta_is_the_base_iterate_in_both_modes():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = EMANesterov(torch.optim.SGD(model.parameters(), lr=0.1), gamma=0.5, beta=0.7)
    assert torch.equal(opt.theta(model.weight), model.weight)  # before the first step
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 3)).pow(2).sum().backward()
        opt.step()
    expected = model.weight.detach() - 0.7 * opt.state[model.weight]["m"]
    assert torch.allclose(opt.theta(model.weight), expected, atol=1e-7)
    assert not torch.allclose(expected, model.weight)
    opt.eval()
    assert torch.equal(opt.theta(model.weight), model.weight)
    with pytest.raises(KeyError, match="not a parameter"):
        opt.theta(torch.zeros(2, 3))
