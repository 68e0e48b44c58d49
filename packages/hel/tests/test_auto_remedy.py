"""Exact by default: the echo picks its mode and re-anchoring interval itself.

``HamiltonianEcho(model, loss_fn)`` runs the linearized echo (the exact eps -> 0 limit) on
cells with an analytic force tangent, and ``checkpoint_every="auto"`` re-runs a call whose
monitored echo error exceeds the tolerance with an interval predicted from the errors' growth.
"""

import math
import warnings

import pytest
import torch

from hel import (
    BPTT,
    EchoLearning,
    EchoRNN,
    HamiltonianCell,
    HamiltonianEcho,
    HopfieldOscillatorCell,
    RateEchoCell,
    ReversibilityReport,
    ReversibilityWarning,
    compare_estimators,
)
from hel._reversibility import AUTO_RETRIES, Anchors, next_interval, rerun_interval


def _default_net(T, dtype, B=4):
    g = torch.Generator().manual_seed(0)
    model = EchoRNN(HopfieldOscillatorCell(1, 32, generator=g), 4).to(dtype)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(B, T, 1, generator=g).to(dtype)
    y = torch.randint(0, 4, (B,), generator=g)
    return model, x, y, torch.nn.CrossEntropyLoss()


class _QuadraticCell(HamiltonianCell):
    """A user cell with only a potential (no analytic tangent): auto falls back to centred."""

    def __init__(self, m, n):
        super().__init__(m, n)
        self.k = torch.nn.Parameter(torch.ones(n))

    def potential(self, phi, u):
        return 0.5 * (self.k * phi * phi).sum(1) - (phi * u.sum(1, keepdim=True)).sum(1)


def test_auto_mode_is_linearized_where_the_cell_has_an_analytic_tangent():
    loss = torch.nn.CrossEntropyLoss()
    hop = EchoRNN(HopfieldOscillatorCell(1, 4), 2)
    assert HamiltonianEcho(hop, loss).mode == "linearized"
    assert HamiltonianEcho(hop, loss).checkpoint_every == "auto"
    assert HamiltonianEcho(EchoRNN(_QuadraticCell(1, 3), 2), loss).mode == "centered"
    assert EchoLearning(EchoRNN(RateEchoCell(1, 4), 2), loss, mode="auto").mode == "linearized"
    assert EchoLearning(EchoRNN(RateEchoCell(1, 4), 2), loss).mode == "centered"  # unchanged
    two = HamiltonianEcho(hop, loss, mode="two_pass")  # cannot re-anchor: auto means none
    assert two.checkpoint_every is None
    with pytest.raises(ValueError, match="checkpoint_every must be None, 'auto'"):
        HamiltonianEcho(hop, loss, checkpoint_every="sometimes")
    with pytest.raises(ValueError, match="mode must be 'auto' or one of"):
        HamiltonianEcho(hop, loss, mode="exact")


def test_short_default_run_stores_nothing_and_is_exact():
    model, x, y, loss = _default_net(50, torch.float64)
    est = HamiltonianEcho(model, loss)
    res = compare_estimators(model, (x, y), loss, {"e": est})["e"]
    assert res["rel_error"] <= 1e-9
    assert est.last_stats["attempts"] == 1
    assert est.last_stats["checkpoint_every"] is None
    assert est.last_stats["stored_steps"] == 0
    assert est.auto_interval is None


def test_default_gradient_is_bptt_where_the_plain_echo_fails_float32():
    # The chaotic default network in float32 at T = 2000: the plain linearized echo drifts
    # off the trajectory (cosine < 0.9, tests/test_long_sequences.py); the default re-runs
    # with checkpoints and matches BPTT.
    T = 2000
    model, x, y, loss = _default_net(T, torch.float32)
    plain = HamiltonianEcho(model, loss, checkpoint_every=None)
    est = HamiltonianEcho(model, loss)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReversibilityWarning)
        res = compare_estimators(model, (x, y), loss, {"plain": plain})
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReversibilityWarning)
        res.update(compare_estimators(model, (x, y), loss, {"auto": est}))
    assert math.isfinite(res["plain"]["cosine"])
    assert res["plain"]["cosine"] < 0.9
    assert math.isfinite(res["auto"]["cosine"])
    assert res["auto"]["cosine"] >= 0.9999
    st = est.last_stats
    K = st["checkpoint_every"]
    assert st["attempts"] >= 2
    assert 1 <= K < T
    assert st["stored_steps"] == math.ceil(T / K)  # the memory bound: O(T / K) states
    assert est.reversibility.ok
    # the interval is kept: the next call needs no re-run
    model.zero_grad(set_to_none=True)
    est.backward(x, y)
    assert est.last_stats["attempts"] == 1
    assert est.last_stats["checkpoint_every"] == K


def test_a_rerun_leaves_the_head_gradient_counted_once():
    model, x, y, loss = _default_net(2000, torch.float32)
    model.zero_grad(set_to_none=True)
    BPTT(model, loss).backward(x, y)
    ref = [p.grad.clone() for p in model.head.parameters()]
    model.zero_grad(set_to_none=True)
    est = HamiltonianEcho(model, loss)
    est.backward(x, y)
    assert est.last_stats["attempts"] >= 2
    for p, r in zip(model.head.parameters(), ref, strict=True):
        torch.testing.assert_close(p.grad, r, rtol=1e-4, atol=1e-6)


def test_next_interval_from_the_error_growth():
    u = torch.finfo(torch.float64).eps
    rep = ReversibilityReport(errors={0: 1e-3, 500: 1e-12}, tolerance=1e-4)
    # rate log(1e-3/u)/1000 from the initial state; aim at 1e-5: K = log(1e-5/u)/rate
    k_pred = int(1000 * math.log(1e-5 / u) / math.log(1e-3 / u))
    assert next_interval(rep, 1000, torch.float64) == min(k_pred, 500)
    fast = ReversibilityReport(errors={900: 1e-2}, tolerance=1e-4)  # 1e-2 after 100 steps
    k = next_interval(fast, 1000, torch.float64)
    assert k == min(int(100 * math.log(1e-5 / u) / math.log(1e-2 / u)), 50)  # at most half
    # with checkpoints the distance is the interval; a diverged echo gives a quarter of it
    div = ReversibilityReport(errors={0: float("inf")}, tolerance=1e-4, checkpoint_every=40)
    assert next_interval(div, 1000, torch.float64) == 10
    tiny = ReversibilityReport(errors={0: 1.0}, tolerance=1e-4, checkpoint_every=1)
    assert next_interval(tiny, 5, torch.float64) == 1


def test_stop_rule_rerun_interval():
    f64, T = torch.float64, 1000
    miss = ReversibilityReport(errors={0: 1e-2}, tolerance=1e-4)
    ok = ReversibilityReport(errors={0: 1e-5}, tolerance=1e-4)
    k = next_interval(miss, T, f64)
    assert rerun_interval(miss, None, math.inf, 0, T, f64) == k  # first miss: re-run
    assert rerun_interval(ok, None, math.inf, 0, T, f64) is None  # within tolerance
    assert rerun_interval(miss, 40, 2e-2, 1, T, f64) == next_interval(miss, T, f64)  # lower
    assert rerun_interval(miss, 40, 1.01e-2, 1, T, f64) is not None  # any decrease continues
    assert rerun_interval(miss, 40, 1e-2, 1, T, f64) is None  # not lower at all: stop
    assert rerun_interval(miss, 40, 5e-3, 1, T, f64) is None  # higher: stop
    assert rerun_interval(miss, 1, 2e-2, 1, T, f64) is None  # nothing shorter than 1
    assert rerun_interval(miss, 40, 2e-2, AUTO_RETRIES, T, f64) is None  # retries spent
    assert rerun_interval(miss, 40, 2e-2, AUTO_RETRIES - 1, T, f64) is not None
    # a diverged first attempt re-runs (a quarter of the failed stretch); NaN never passes
    div = ReversibilityReport(errors={0: float("inf")}, tolerance=1e-4)
    assert rerun_interval(div, None, math.inf, 0, T, f64) == T // 4
    assert rerun_interval(div, 250, math.inf, 1, T, f64) is None  # still diverged: stop
    nan = ReversibilityReport(errors={0: float("nan"), 500: 1e-6}, tolerance=1e-4)
    assert not nan.ok
    assert nan.max_error == math.inf
    assert ReversibilityReport(errors={0: 1e-6, 500: float("nan")}, tolerance=1e-4).max_error > 1


def _scripted(est, errors, B):
    """Replace the passes of ``est.backward`` with reports carrying the scripted errors."""
    seen = []

    def fake(x, y, state):
        seen.append(est._interval)
        tol = est.tolerance
        anchors = Anchors(x.shape[1], est._interval, torch.ones(B, dtype=x.dtype), tol, x.dtype)
        anchors.report.errors = dict(errors[len(seen) - 1])
        grads = [torch.zeros_like(p) for p in est.cell_params]
        return grads, x.new_zeros(()), 0.0, anchors

    est._backward = fake
    return seen


@pytest.mark.parametrize(
    ("errors", "attempts", "warns"),
    [
        ([{0: 1e-6}], 1, False),  # exact at once: no re-run, no checkpoint
        ([{0: 1e-2}, {0: 1e-6}], 2, False),  # one re-run fixes it
        ([{0: float("inf")}, {0: 1e-6}], 2, False),  # a diverged echo re-runs too
        ([{0: 1e-2}, {0: 9.9e-3}, {0: 9.9e-3}], 3, True),  # saturated: stop after no gain
        ([{0: 1e-2 / 2**i} for i in range(AUTO_RETRIES + 1)], AUTO_RETRIES + 1, True),
    ],
)
def test_backward_follows_the_stop_rule(errors, attempts, warns):
    T, B = 1000, 2
    model, x, y, loss = _default_net(T, torch.float64, B=B)
    est = HamiltonianEcho(model, loss, tolerance=1e-4)
    seen = _scripted(est, errors, B)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.backward(x, y)
    assert est.last_stats["attempts"] == len(seen) == attempts
    assert any(issubclass(w.category, ReversibilityWarning) for w in caught) == warns
    # each re-run uses the interval predicted from the previous attempt's report
    expected = [None]
    for e in errors[: attempts - 1]:
        rep = ReversibilityReport(errors=e, tolerance=1e-4, checkpoint_every=expected[-1])
        expected.append(next_interval(rep, T, torch.float64))
    assert seen == expected
    assert est.auto_interval == expected[-1]
    assert est.last_stats["checkpoint_every"] == expected[-1]


@pytest.mark.slow
def test_default_gradient_is_bptt_at_t20000_float64():
    # float64: the chaotic network's BPTT gradient overflows float32 near T = 8000
    T = 20000
    model, x, y, loss = _default_net(T, torch.float64)
    est = HamiltonianEcho(model, loss)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReversibilityWarning)
        cos = compare_estimators(model, (x, y), loss, {"e": est})["e"]["cosine"]
    assert math.isfinite(cos)
    assert cos >= 0.9999
    K = est.last_stats["checkpoint_every"]
    assert K is not None
    assert est.last_stats["stored_steps"] == math.ceil(T / K) <= T // 100
