import math

import pytest
import torch

import reference
from engine_zo import LOZO, Engine, HiZOO, MeZO, SubZero, ZOAdam
from methodkit import zo
from methodkit.bench import ForwardCounter


@pytest.mark.parametrize(
    ("cls", "kwargs", "calls"),
    [
        (MeZO, {}, 2),
        (LOZO, {"rank": 2}, 2),
        (LOZO, {"rank": 2, "momentum": 0.9}, 2),
        (SubZero, {"rank": 2}, 2),
        (HiZOO, {}, 3),
        (ZOAdam, {}, 2),
        (Engine, {"ranks": (2,)}, 2),
    ],
)
def test_closure_calls_per_step(toy, cls, kwargs, calls):
    counter = ForwardCounter(toy.loss)
    opt = cls(toy.parameters(), lr=1e-3, **kwargs)
    for k in range(1, 6):
        opt.step(counter)
        assert counter.count == calls * k == opt.forward_passes
    assert cls.forwards_per_step == calls


def test_mezo_matches_float64_reference(toy, recorder):
    eps, lr, wd = 1e-3, 0.05, 0.1
    opt = MeZO(toy.parameters(), lr=lr, eps=eps, weight_decay=wd, seed=4)
    opt.step(toy.loss)
    theta0 = reference.theta0(toy)
    seed = zo.derive_seed(4, 0, 1)
    xi = [reference.gaussian(seed, i, t.shape) for i, t in enumerate(theta0)]
    rec = recorder(toy.parameters(), toy.loss)
    opt.step(rec)
    reference.check_probes(rec, theta0, xi, eps)
    c = (rec.values[0] - rec.values[1]) / (2 * eps)
    reference.check_update(
        toy, [(1 - lr * wd) * t - lr * c * x for t, x in zip(theta0, xi, strict=True)]
    )


def test_lozo_matches_float64_reference(toy, recorder):
    eps, lr, r = 1e-3, 0.05, 2
    opt = LOZO(toy.parameters(), lr=lr, eps=eps, rank=r, lazy_interval=3, seed=1)
    for _ in range(4):
        opt.step(toy.loss)
    theta0 = reference.theta0(toy)
    step_seed, basis = zo.derive_seed(1, 0, 4), zo.derive_seed(1, 1, 4 // 3)
    U = torch.randn((6, r), generator=zo.tensor_generator(step_seed, 0)).double()
    V = torch.randn((5, r), generator=zo.tensor_generator(basis, 0)).double()
    xi = [U @ V.T / math.sqrt(r), reference.gaussian(step_seed, 1, (6,))]
    rec = recorder(toy.parameters(), toy.loss)
    opt.step(rec)
    reference.check_probes(rec, theta0, xi, eps)
    c = (rec.values[0] - rec.values[1]) / (2 * eps)
    reference.check_update(toy, [t - lr * c * x for t, x in zip(theta0, xi, strict=True)])


def test_lozo_momentum_matches_float64_reference(toy, recorder):
    eps, lr, r, beta = 1e-3, 0.05, 2, 0.8
    opt = LOZO(toy.parameters(), lr=lr, eps=eps, rank=r, lazy_interval=2, momentum=beta, seed=2)
    N = None
    Mb = None
    V_prev = None
    for t in range(4):
        theta0 = reference.theta0(toy)
        step_seed, basis = zo.derive_seed(2, 0, t), zo.derive_seed(2, 1, t // 2)
        U = torch.randn((6, r), generator=zo.tensor_generator(step_seed, 0)).double()
        V = torch.randn((5, r), generator=zo.tensor_generator(basis, 0)).double()
        zb = reference.gaussian(step_seed, 1, (6,))
        rec = recorder(toy.parameters(), toy.loss)
        opt.step(rec)
        c = (rec.values[0] - rec.values[1]) / (2 * eps)
        if N is not None and t % 2 == 0:
            N = N @ (V_prev.T @ V) / 5
        N = (1 - beta) * c * U if N is None else beta * N + (1 - beta) * c * U
        Mb = (1 - beta) * c * zb if Mb is None else beta * Mb + (1 - beta) * c * zb
        V_prev = V
        reference.check_update(toy, [theta0[0] - lr * N @ V.T / math.sqrt(r), theta0[1] - lr * Mb])


def test_subzero_matches_float64_reference(toy, recorder):
    eps, lr, r = 1e-3, 0.05, 2
    opt = SubZero(toy.parameters(), lr=lr, eps=eps, rank=r, refresh_interval=5, seed=3)
    theta0 = reference.theta0(toy)
    step_seed, basis = zo.derive_seed(3, 0, 0), zo.derive_seed(3, 2, 0)
    g = zo.tensor_generator(basis, 0)
    A = torch.randn((6, r), generator=g, dtype=torch.float64)
    B = torch.randn((5, r), generator=g, dtype=torch.float64)
    U, V = torch.linalg.qr(A).Q, torch.linalg.qr(B).Q
    torch.testing.assert_close(U.T @ U, torch.eye(r, dtype=torch.float64))
    S = torch.randn((r, r), generator=zo.tensor_generator(step_seed, 0)).double()
    xi = [math.sqrt(30) / r * U @ S @ V.T, reference.gaussian(step_seed, 1, (6,))]
    rec = recorder(toy.parameters(), toy.loss)
    opt.step(rec)
    reference.check_probes(rec, theta0, xi, eps)
    c = (rec.values[0] - rec.values[1]) / (2 * eps)
    reference.check_update(toy, [t - lr * c * x for t, x in zip(theta0, xi, strict=True)])


def test_hizoo_matches_float64_reference(toy, recorder):
    eps, lr, alpha = 1e-2, 0.05, 0.3
    opt = HiZOO(toy.parameters(), lr=lr, eps=eps, hessian_smooth=alpha, seed=6)
    D = [torch.ones_like(t) for t in reference.theta0(toy)]
    for t in range(3):
        theta0 = reference.theta0(toy)
        seed = zo.derive_seed(6, 0, t)
        z = [reference.gaussian(seed, i, p.shape) for i, p in enumerate(theta0)]
        xi = [zi / d.sqrt() for zi, d in zip(z, D, strict=True)]
        rec = recorder(toy.parameters(), toy.loss)
        opt.step(rec)
        l0, lp, lm = rec.values
        reference.check_probes(rec, theta0, xi, eps, first=1)
        D = [
            (1 - alpha) * d + alpha * abs(lp + lm - 2 * l0) / (2 * eps**2) * d * zi**2
            for d, zi in zip(D, z, strict=True)
        ]
        c = (lp - lm) / (2 * eps)
        reference.check_update(
            toy, [t0 - lr * c * zi / d.sqrt() for t0, zi, d in zip(theta0, z, D, strict=True)]
        )
        for p, d in zip(toy.parameters(), D, strict=True):
            torch.testing.assert_close(opt.state[p]["hessian"].double(), d, rtol=1e-5, atol=1e-6)


def test_zoadam_matches_float64_reference(toy, recorder):
    eps, lr, b1, b2, delta = 1e-3, 0.01, 0.9, 0.99, 1e-8
    opt = ZOAdam(toy.parameters(), lr=lr, eps=eps, betas=(b1, b2), adam_eps=delta, seed=8)
    m = [torch.zeros_like(t) for t in reference.theta0(toy)]
    v = [torch.zeros_like(t) for t in reference.theta0(toy)]
    for t in range(1, 4):
        theta0 = reference.theta0(toy)
        seed = zo.derive_seed(8, 0, t - 1)
        z = [reference.gaussian(seed, i, p.shape) for i, p in enumerate(theta0)]
        rec = recorder(toy.parameters(), toy.loss)
        opt.step(rec)
        c = (rec.values[0] - rec.values[1]) / (2 * eps)
        g = [c * zi for zi in z]
        m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g, strict=True)]
        v = [b2 * vi + (1 - b2) * gi**2 for vi, gi in zip(v, g, strict=True)]
        expected = [
            t0 - lr * (mi / (1 - b1**t)) / ((vi / (1 - b2**t)).sqrt() + delta)
            for t0, mi, vi in zip(theta0, m, v, strict=True)
        ]
        reference.check_update(toy, expected)


@pytest.mark.parametrize("cls", [MeZO, LOZO, SubZero])
def test_memory_light_baselines_keep_no_tensor_state(toy, cls):
    opt = cls(toy.parameters(), lr=1e-3)
    for _ in range(3):
        opt.step(toy.loss)
    assert len(opt.state) == 0
    assert set(opt.state_dict()["zo"]) >= {"seed", "step", "forward_passes"}


def test_state_heavy_baselines_are_marked(toy):
    opt = ZOAdam(toy.parameters(), lr=1e-3)
    opt.step(toy.loss)
    assert all(set(s) == {"exp_avg", "exp_avg_sq"} for s in opt.state.values())
    opt = HiZOO(toy.parameters(), lr=1e-3)
    opt.step(toy.loss)
    assert all(set(s) == {"hessian"} for s in opt.state.values())


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (MeZO, {"lr": 0.0}, "lr"),
        (MeZO, {"eps": -1.0}, "eps"),
        (MeZO, {"eps": float("inf")}, "eps must be finite"),
        (MeZO, {"lr": float("inf")}, "lr must be finite"),
        (MeZO, {"noise": "laplace"}, "noise"),
        (LOZO, {"rank": 0}, "rank"),
        (LOZO, {"lazy_interval": 0}, "lazy_interval"),
        (LOZO, {"momentum": 1.0}, "momentum"),
        (SubZero, {"refresh_interval": 0}, "refresh_interval"),
        (HiZOO, {"hessian_smooth": 2.0}, "hessian_smooth"),
        (ZOAdam, {"betas": (0.9, 1.0)}, "betas"),
        (ZOAdam, {"adam_eps": 0.0}, "adam_eps"),
    ],
)
def test_baseline_bad_arguments(toy, cls, kwargs, match):
    args = {"lr": 1e-3, **kwargs}
    with pytest.raises(ValueError, match=match):
        cls(toy.parameters(), **args)


@pytest.mark.parametrize("cls", [MeZO, LOZO, SubZero, HiZOO, ZOAdam])
@pytest.mark.parametrize("failing_call", [1, 2])
def test_baselines_restore_on_bad_closure_bitwise(toy, cls, failing_call):
    opt = cls(toy.parameters(), lr=1e-2, eps=0.3)  # large eps: plain inverses lose bits
    opt.step(toy.loss)  # HiZOO/ZO-Adam now hold state; LOZO/SubZero hold a basis
    before = [p.detach().clone() for p in toy.parameters()]
    calls = []

    def closure():
        calls.append(1)
        return float("nan") if len(calls) == failing_call + (cls is HiZOO) else toy.loss()

    with pytest.raises(ValueError, match="non-finite"):
        opt.step(closure)
    for p, b in zip(toy.parameters(), before, strict=True):
        assert torch.equal(p.detach(), b)
    with pytest.raises(TypeError, match="closure"):
        opt.step()
