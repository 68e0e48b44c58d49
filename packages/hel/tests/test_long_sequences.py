"""Long chaotic runs: the reversibility monitor warns, re-anchoring from checkpoints fixes it.

On the default network (n = 32) the dynamics are chaotic: the echo's nudged part grows like
the BPTT adjoint (about 1e7 over 2000 steps) and the centred finite difference leaves its
linear regime; in float32 the free reversal itself drifts off. Both tests compare against
autograd BPTT on the same model and fail without ``checkpoint_every``.
"""

import re
import warnings

import pytest
import torch

from hel import (
    EchoRNN,
    HamiltonianEcho,
    HopfieldOscillatorCell,
    ReversibilityWarning,
    compare_estimators,
)


def _default_net(T, dtype):
    g = torch.Generator().manual_seed(0)
    model = EchoRNN(HopfieldOscillatorCell(1, 32, generator=g), 4).to(dtype)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, T, 1, generator=g).to(dtype)
    y = torch.randint(0, 4, (4,), generator=g)
    return model, x, y, torch.nn.CrossEntropyLoss()


def _cosine(model, x, y, loss, est):
    return compare_estimators(model, (x, y), loss, {"e": est})["e"]["cosine"]


@pytest.mark.slow
def test_centered_echo_at_t2000_needs_checkpoints_float64():
    model, x, y, loss = _default_net(2000, torch.float64)
    plain = HamiltonianEcho(model, loss, mode="centered", checkpoint_every=None)
    with pytest.warns(ReversibilityWarning, match="checkpoint_every"):
        cos_plain = _cosine(model, x, y, loss, plain)
    assert cos_plain < 0.9  # without the remedy the gradient is not BPTT's
    assert not plain.reversibility.ok
    assert plain.reversibility.response > 100  # the nudged echo left the linear regime
    fixed = HamiltonianEcho(model, loss, mode="centered", checkpoint_every=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReversibilityWarning)
        cos_fixed = _cosine(model, x, y, loss, fixed)
    assert cos_fixed >= 0.9999
    assert fixed.reversibility.ok
    assert fixed.last_stats["stored_steps"] == 2000 // 50


@pytest.mark.slow
def test_linearized_echo_at_t2000_needs_checkpoints_float32():
    model, x, y, loss = _default_net(2000, torch.float32)
    plain = HamiltonianEcho(model, loss, mode="linearized", checkpoint_every=None)
    with pytest.warns(ReversibilityWarning):
        cos_plain = _cosine(model, x, y, loss, plain)
    assert cos_plain < 0.9  # float32 rounding drift of the free reversal
    fixed = HamiltonianEcho(model, loss, mode="linearized", checkpoint_every=100)
    cos_fixed = _cosine(model, x, y, loss, fixed)
    assert cos_fixed >= 0.9999
    assert fixed.reversibility.max_error < 1e-5


def test_monitor_reports_initial_state_and_points_on_the_way():
    model, x, y, loss = _default_net(50, torch.float64)
    est = HamiltonianEcho(model, loss, mode="linearized")
    est.backward(x, y)
    rep = est.reversibility
    assert sorted(rep.errors) == [0, 10, 20, 30, 40]
    assert rep.max_error < 1e-12  # the free float64 reversal is exact to rounding here
    assert est.last_stats["stored_steps"] == 0  # monitoring keeps O(1) states, no trajectory


def test_monitor_tolerance_is_user_set_and_two_pass_is_not_monitored():
    model, x, y, loss = _default_net(50, torch.float64)
    est = HamiltonianEcho(model, loss, mode="linearized", checkpoint_every=None, tolerance=1e-30)
    with pytest.warns(ReversibilityWarning, match="tolerance 1.0e-30"):
        est.backward(x, y)
    two = HamiltonianEcho(model, loss, mode="two_pass")
    two.backward(x, y)
    assert two.reversibility is None
    with pytest.raises(ValueError, match="tolerance must be"):
        HamiltonianEcho(model, loss, tolerance=-1.0)
    with pytest.raises(ValueError, match="checkpoint_every must be"):
        HamiltonianEcho(model, loss, checkpoint_every=0)
    with pytest.raises(ValueError, match="two_pass"):
        HamiltonianEcho(model, loss, mode="two_pass", checkpoint_every=10)


@pytest.mark.parametrize("mode", ["centered", "linearized"])
def test_checkpoints_leave_short_run_gradients_exact(mode):
    model, x, y, loss = _default_net(60, torch.float64)
    eps = 1e-6 if mode == "centered" else "auto"
    ref = HamiltonianEcho(model, loss, eps=eps, mode=mode, checkpoint_every=None)
    ck = HamiltonianEcho(model, loss, eps=eps, mode=mode, checkpoint_every=7)
    res = compare_estimators(model, (x, y), loss, {"ref": ref, "ck": ck})
    assert res["ck"]["rel_error"] <= 10 * max(res["ref"]["rel_error"], 1e-9)


@pytest.mark.parametrize("mode", ["centered", "linearized"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_warning_text_fits_the_mode_and_dtype(mode, dtype):
    model, x, y, loss = _default_net(40, dtype)
    est = HamiltonianEcho(model, loss, mode=mode, checkpoint_every=None, tolerance=1e-30)
    with pytest.warns(ReversibilityWarning) as rec:
        est.backward(x, y)
    text = str(rec[0].message)
    assert "nan" not in text.lower()
    assert ("grew" in text) == (mode == "centered")  # the linearized echo has no finite nudge
    if mode == "centered":
        assert re.search(r"nudged part grew [0-9.e+-]+x", text)
    advises_f64 = "dtype=torch.float64" in text
    assert advises_f64 == (dtype == torch.float32)  # no float64 advice to a float64 run
    assert str(dtype) in text
