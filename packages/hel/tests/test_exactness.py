"""The echo gradients equal autograd BPTT (float64)."""

import itertools

import pytest
import torch

from hel import BPTT, EchoLearning, EProp, HamiltonianEcho, TruncatedBPTT
from hel_testutils import bptt_loss, cell_grads, make_batch, make_model
from methodkit.testing import assert_grad_matches_autograd, relative_error

READOUTS = ["mean", "last", "sequence"]


def _ref(model, x, y, loss):
    ref = torch.autograd.grad(bptt_loss(model, x, y, loss)(), list(model.cell.parameters()))
    return torch.cat([r.reshape(-1) for r in ref]).numpy()


def _flat(grads):
    return torch.cat([g.reshape(-1) for g in grads]).numpy()


@pytest.mark.parametrize("readout", READOUTS)
def test_centered_echo_matches_bptt(readout):
    model = make_model(readout)
    x, y, loss = make_batch(readout)
    est = HamiltonianEcho(model, loss, eps=1e-6, mode="centered")
    grads = cell_grads(model, est, x, y)
    params = list(model.cell.parameters())
    # every parameter separately, not only the concatenation
    for i, (p, g) in enumerate(zip(params, grads, strict=True)):
        assert_grad_matches_autograd(
            lambda i=i: bptt_loss(model, x, y, loss)() + 0 * params[i].sum(), [p], [g], rtol=1e-6
        )


@pytest.mark.parametrize("readout", READOUTS)
def test_linearized_echo_matches_bptt_to_1e9(readout):
    model = make_model(readout)
    x, y, loss = make_batch(readout)
    grads = cell_grads(model, HamiltonianEcho(model, loss, mode="linearized"), x, y)
    params = list(model.cell.parameters())
    for p, g in zip(params, grads, strict=True):
        assert_grad_matches_autograd(bptt_loss(model, x, y, loss), [p], [g], rtol=1e-9)


def test_error_orders_in_eps():
    model = make_model("mean")
    x, y, loss = make_batch("mean")
    ref = _ref(model, x, y, loss)
    two = [
        relative_error(
            _flat(cell_grads(model, HamiltonianEcho(model, loss, eps=e, mode="two_pass"), x, y)),
            ref,
        )
        for e in (1e-3, 1e-4, 1e-5)
    ]
    for a, b in itertools.pairwise(two):
        assert 5 < a / b < 20  # linear: ~10x per decade
    cen = [
        relative_error(_flat(cell_grads(model, HamiltonianEcho(model, loss, eps=e), x, y)), ref)
        for e in (1e-1, 1e-2)
    ]
    assert 50 < cen[0] / cen[1] < 200  # quadratic: ~100x per decade


@pytest.mark.parametrize("readout", ["mean", "sequence"])
def test_echo_learning_equals_hel_on_conservative_force(readout):
    model = make_model(readout)
    x, y, loss = make_batch(readout)
    hel = _flat(cell_grads(model, HamiltonianEcho(model, loss, eps=1e-6), x, y))
    el = _flat(cell_grads(model, EchoLearning(model, loss, eps=1e-6), x, y))
    assert relative_error(el, hel) <= 1e-8


def test_echo_learning_linearized_matches_bptt_on_conservative_force():
    model = make_model("last")
    x, y, loss = make_batch("last")
    grads = cell_grads(model, EchoLearning(model, loss, mode="linearized"), x, y)
    assert_grad_matches_autograd(
        bptt_loss(model, x, y, loss), list(model.cell.parameters()), grads, rtol=1e-9
    )


@pytest.mark.parametrize("readout", READOUTS)
def test_truncated_bptt_with_k_at_least_t_is_bptt(readout):
    model = make_model(readout)
    x, y, loss = make_batch(readout, T=12)
    for k in (12, 50):
        grads = cell_grads(model, TruncatedBPTT(model, loss, k=k), x, y)
        assert_grad_matches_autograd(
            bptt_loss(model, x, y, loss), list(model.cell.parameters()), grads, rtol=1e-12
        )


def test_truncated_bptt_k1_is_the_immediate_gradient():
    model = make_model("sequence")
    x, y, loss = make_batch("sequence", T=8)
    cell, T = model.cell, x.shape[1]
    params = list(cell.parameters())
    ref = [torch.zeros_like(p) for p in params]
    phi = pi = torch.zeros(3, 5, dtype=torch.float64)
    for t in range(T):  # one step from the detached previous state, its own loss only
        phi0, pi0 = phi.detach(), pi.detach()
        half = phi0 + 0.5 * cell.dt * pi0
        pi = pi0 + cell.dt * cell.force(half, x[:, t])
        phi = half + 0.5 * cell.dt * pi
        lt = loss(model.head(phi), y[:, t]) / T
        for r, g in zip(ref, torch.autograd.grad(lt, params), strict=True):
            r += g
    grads = cell_grads(model, TruncatedBPTT(model, loss, k=1), x, y)
    assert relative_error(_flat(grads), _flat(ref)) < 1e-12


def _eprop_reference(model, x, y, loss):
    """Brute force: autograd step Jacobians with off-diagonal neuron blocks masked."""
    cell, h = model.cell, model.cell.dt
    n = cell.hidden_size
    A, Bm, b, ar = (p.detach() for p in cell.parameters())
    W0 = 0.5 * (A + A.T)

    def step(z, u, W, Bm, b, ar):  # unconstrained W: W_ij acts on neuron i only
        phi, pi = z[:n], z[n:]
        half = phi + 0.5 * h * pi
        s = torch.tanh(half)
        f = -torch.nn.functional.softplus(ar) * half + (1 - s * s) * (W @ s + Bm @ u + b)
        pi2 = pi + h * f
        return torch.cat([half + 0.5 * h * pi2, pi2])

    thetas = (W0, Bm, b, ar)
    mask = torch.zeros(2 * n, 2 * n, dtype=torch.float64)
    for i in range(n):
        for a in (i, i + n):
            mask[a, i] = mask[a, i + n] = 1.0
    out_grads = [torch.zeros_like(t) for t in thetas]
    Bsz, T = x.shape[:2]
    z_all = torch.zeros(Bsz, 2 * n, dtype=torch.float64)
    elig = [torch.zeros(Bsz, 2 * n, *t.shape, dtype=torch.float64) for t in thetas]
    for t in range(T):
        new_elig = []
        for bi in range(Bsz):
            z, u = z_all[bi], x[bi, t]
            Jz = torch.autograd.functional.jacobian(lambda zz, u=u: step(zz, u, *thetas), z) * mask
            Jth = torch.autograd.functional.jacobian(lambda *th, z=z, u=u: step(z, u, *th), thetas)
            new_elig.append(
                [torch.tensordot(Jz, e[bi], dims=1) + jt for e, jt in zip(elig, Jth, strict=True)]
            )
        elig = [torch.stack([ne[k] for ne in new_elig]) for k in range(len(thetas))]
        z_all = torch.stack([step(z_all[bi], x[bi, t], *thetas) for bi in range(Bsz)]).detach()
        if model.readout == "sequence":
            p = z_all[:, :n].clone().requires_grad_(True)
            (L_t,) = torch.autograd.grad(loss(model.head(p), y[:, t]) / T, p)
            for k, e in enumerate(elig):
                out_grads[k] += torch.einsum("bi,bi...->...", L_t, e[:, :n])
    g_W = out_grads[0]
    return [0.5 * (g_W + g_W.T), *out_grads[1:]]


def test_eprop_equals_brute_force_reference():
    model = make_model("sequence", n=3)
    x, y, loss = make_batch("sequence", T=6, B=2)
    ref = _eprop_reference(model, x, y, loss)
    grads = cell_grads(model, EProp(model, loss), x, y)
    assert relative_error(_flat(grads), _flat(ref)) < 1e-10
    bptt = _flat(cell_grads(model, BPTT(model, loss), x, y))
    assert relative_error(_flat(grads), bptt) > 1e-3  # and it is an approximation
