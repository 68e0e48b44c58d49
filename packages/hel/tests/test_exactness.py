"""The echo gradients equal autograd BPTT (float64)."""

import itertools

import pytest
import torch

from hel import BPTT, EchoLearning, EProp, HamiltonianEcho, TruncatedBPTT
from methodkit.testing import assert_grad_matches_autograd, relative_error
from reference import (
    bptt_grads,
    bptt_loss,
    cell_grads,
    eprop_brute_force,
    immediate_gradient,
    make_batch,
    make_model,
)

READOUTS = ["mean", "last", "sequence"]


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
    ref = _flat(bptt_grads(model, x, y, loss))
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
        relative_error(
            _flat(cell_grads(model, HamiltonianEcho(model, loss, eps=e, mode="centered"), x, y)),
            ref,
        )
        for e in (1e-1, 1e-2)
    ]
    assert 50 < cen[0] / cen[1] < 200  # quadratic: ~100x per decade


@pytest.mark.parametrize("readout", ["mean", "sequence"])
def test_echo_learning_equals_hel_on_conservative_force(readout):
    model = make_model(readout)
    x, y, loss = make_batch(readout)
    hel = _flat(cell_grads(model, HamiltonianEcho(model, loss, eps=1e-6, mode="centered"), x, y))
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
    ref = immediate_gradient(model, x, y, loss)
    grads = cell_grads(model, TruncatedBPTT(model, loss, k=1), x, y)
    assert relative_error(_flat(grads), _flat(ref)) < 1e-12


def test_eprop_equals_brute_force_reference():
    model = make_model("sequence", n=3)
    x, y, loss = make_batch("sequence", T=6, B=2)
    ref = eprop_brute_force(model, x, y, loss)
    grads = cell_grads(model, EProp(model, loss), x, y)
    assert relative_error(_flat(grads), _flat(ref)) < 1e-10
    bptt = _flat(cell_grads(model, BPTT(model, loss), x, y))
    assert relative_error(_flat(grads), bptt) > 1e-3  # and it is an approximation
