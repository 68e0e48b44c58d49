import copy

import numpy as np
import pytest
import torch

from hel import (
    BPTT,
    EchoLearning,
    EchoRNN,
    EchoRNNClassifier,
    EchoRNNRegressor,
    EProp,
    ForceCell,
    FrozenRecurrence,
    HamiltonianEcho,
    HopfieldOscillatorCell,
    RateEchoCell,
    TruncatedBPTT,
    compare_estimators,
    delayed_recall,
    homeostatic_loss,
    sequential_digits,
    to_batch_first,
)
from reference import cell_grads, make_batch, make_model


def _all_estimators(model, loss):
    return [
        BPTT(model, loss),
        HamiltonianEcho(model, loss, eps=1e-5, mode="centered"),
        HamiltonianEcho(model, loss, mode="two_pass"),
        HamiltonianEcho(model, loss, mode="linearized"),
        EchoLearning(model, loss),
        TruncatedBPTT(model, loss, k=4),
        EProp(model, loss),
        EProp(model, loss, feedback="random"),
        FrozenRecurrence(model, loss),
    ]


@pytest.mark.parametrize("readout", ["mean", "sequence"])
def test_echo_estimators_store_no_steps_and_run_without_graph(readout):
    model = make_model(readout)
    x, y, loss = make_batch(readout)
    modes = []
    real_force = model.cell.force

    def spy(phi, u):
        modes.append(torch.is_grad_enabled())
        return real_force(phi, u)

    model.cell.force = spy
    for est in (HamiltonianEcho(model, loss), HamiltonianEcho(model, loss, mode="two_pass")):
        modes.clear()
        est.backward(x, y)
        assert est.last_stats["stored_steps"] == 0
        assert est.last_stats["passes"] in (2, 3)
        assert len(modes) >= 2 * x.shape[1]
        assert not any(modes)  # every leapfrog step of both passes ran under no_grad
    assert BPTT(model, loss).backward(x, y) is not None


def test_head_gradients_identical_across_estimators():
    model = make_model("mean")
    x, y, loss = make_batch("mean")
    ref = None
    for est in _all_estimators(model, loss):
        model.zero_grad(set_to_none=True)
        est.backward(x, y)
        hg = [p.grad.clone() for p in model.head.parameters()]
        if ref is None:
            ref = hg
        for a, b in zip(hg, ref, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_backward_accumulates_like_autograd():
    model = make_model("last")
    x, y, loss = make_batch("last")
    for est in _all_estimators(model, loss):
        once = cell_grads(model, est, x, y)
        model.zero_grad(set_to_none=True)
        est.backward(x, y)
        est.backward(x, y)
        for p, g in zip(model.cell.parameters(), once, strict=True):
            torch.testing.assert_close(p.grad, 2 * g, rtol=1e-9, atol=1e-12)


def test_float32_auto_eps_agrees_with_bptt():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = EchoRNN(HopfieldOscillatorCell(1, 32, generator=g), 4)
    x = torch.randn(16, 60, 1, generator=g)
    y = torch.randint(0, 4, (16,), generator=g)
    loss = torch.nn.CrossEntropyLoss()
    res = compare_estimators(
        model,
        (x, y),
        loss,
        {"c": HamiltonianEcho(model, loss), "tp": HamiltonianEcho(model, loss, mode="two_pass")},
    )
    assert res["c"]["cosine"] >= 0.9999
    assert res["tp"]["cosine"] >= 0.999


def test_el_nonsymmetric_is_biased_and_homeostasis_helps():
    model = make_model("mean", n=6, cell="rate", seed=3)
    x, y, loss = make_batch("mean", T=30)
    cos0 = compare_estimators(model, (x, y), loss, {"el": EchoLearning(model, loss, eps=1e-6)})[
        "el"
    ]["cosine"]
    assert cos0 < 0.99
    opt = torch.optim.Adam([model.cell.W], lr=1e-2)
    phis = torch.randn(40, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    h0 = float(homeostatic_loss(model.cell, phis).detach())
    for _ in range(300):
        opt.zero_grad()
        homeostatic_loss(model.cell, phis).backward()
        opt.step()
    assert float(homeostatic_loss(model.cell, phis).detach()) < 0.1 * h0
    cos1 = compare_estimators(model, (x, y), loss, {"el": EchoLearning(model, loss, eps=1e-6)})[
        "el"
    ]["cosine"]
    assert cos1 > cos0
    assert cos1 > 0.95


def test_el_homeostasis_adds_its_gradient():
    model = make_model("mean", n=4, cell="rate")
    x, y, loss = make_batch("mean", T=10)
    base = cell_grads(model, EchoLearning(model, loss, eps=1e-6), x, y)
    est = EchoLearning(model, loss, eps=1e-6, homeostasis=0.5)
    with_h = cell_grads(model, est, x, y)
    assert est.last_stats["homeostatic_loss"] > 0
    assert not torch.allclose(base[0], with_h[0])
    torch.testing.assert_close(base[1], with_h[1])  # B does not enter the Jacobian


# ------------------------------------------------------------------ bad input
def test_bad_inputs_raise_clear_errors():
    model = make_model("mean")
    x, y, loss = make_batch("mean")
    est = HamiltonianEcho(model, loss)
    with pytest.raises(ValueError, match="3-D"):
        est.backward(x[0], y)
    with pytest.raises(ValueError, match="features"):
        est.backward(torch.randn(3, 5, 4, dtype=torch.float64), y)
    with pytest.raises(ValueError, match="T = 0"):
        est.backward(torch.randn(3, 0, 2, dtype=torch.float64), y)
    xn = x.clone()
    xn[0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        est.backward(xn, y)
    with pytest.raises(TypeError, match="float32 or float64"):
        model(x.half())
    with pytest.raises(ValueError, match="dt"):
        HopfieldOscillatorCell(1, 4, dt=0.0)
    with pytest.raises(ValueError, match="eps"):
        HamiltonianEcho(model, loss, eps=-1.0)
    with pytest.raises(TypeError, match="eps"):
        HamiltonianEcho(model, loss, eps="big")
    with pytest.raises(ValueError, match="mode"):
        HamiltonianEcho(model, loss, mode="forward")
    with pytest.raises(ValueError, match="readout"):
        EchoRNN(model.cell, 3, readout="max")
    with pytest.raises(ValueError, match="feedback"):
        EProp(model, loss, feedback="sideways")
    with pytest.raises(ValueError, match="reduction='none'"):
        HamiltonianEcho(model, torch.nn.CrossEntropyLoss(reduction="none"))
    with pytest.raises(ValueError, match="k must be"):
        TruncatedBPTT(model, loss, k=0)
    with pytest.raises(TypeError, match="EchoLearning"):
        HamiltonianEcho(make_model("mean", cell="rate"), loss)
    seq = make_model("sequence")
    xs, ys, mse = make_batch("sequence", T=10)
    with pytest.raises(ValueError, match="T = 10"):
        HamiltonianEcho(seq, mse).backward(xs, ys[:, :7])
    yn = ys.clone()
    yn[0, 0, 0] = float("inf")
    with pytest.raises(ValueError, match="y contains NaN"):
        BPTT(seq, mse).backward(xs, yn)


def test_damping_warns_and_custom_cell_without_eprop_support():
    leaky = EchoRNN(RateEchoCell(2, 4, leak=0.1), 3).double()
    loss = torch.nn.CrossEntropyLoss()
    with pytest.warns(UserWarning, match="reversible"):
        EchoLearning(leaky, loss)

    class MyCell(ForceCell):
        def force(self, phi, u):
            return -phi

    with pytest.raises(NotImplementedError, match="force_param_local"):
        EProp(EchoRNN(MyCell(2, 4), 3), loss)


# ------------------------------------------------------------------ data + sklearn
def test_data_loaders_shapes():
    Xtr, Xte, _, _ = sequential_digits()
    assert Xtr.shape == (1438, 64, 1)
    assert Xte.shape == (359, 64, 1)
    u, y = delayed_recall(4, T=50, delay=5)
    assert u.shape == y.shape == (4, 50, 1)
    np.testing.assert_array_equal(y[:, 5:], u[:, :-5])
    assert to_batch_first(np.zeros((2, 3, 7))).shape == (2, 7, 3)
    with pytest.raises(ValueError, match="numpy3D"):
        to_batch_first(np.zeros((2, 3)))


def test_aeon_loader():
    pytest.importorskip("aeon")
    from hel import load_aeon

    X, y = load_aeon("gunpoint", "train")
    assert X.shape == (50, 150, 1)
    assert set(np.unique(y)) == {0, 1}
    with pytest.raises(ValueError, match="name must be"):
        load_aeon("imagenet")


def test_sklearn_wrappers_smoke():
    from sklearn.base import clone

    rng = np.random.default_rng(0)
    X = rng.normal(size=(24, 2, 12)).astype(np.float32)
    y = np.array(["a", "b"] * 12)
    clf = EchoRNNClassifier(hidden_size=6, epochs=2, batch_size=8, random_state=0)
    assert clone(clf).get_params() == clf.get_params()
    clf.set_params(lr=1e-2)
    p1 = clf.fit(X, y).predict_proba(X)
    assert p1.shape == (24, 2)
    np.testing.assert_allclose(p1.sum(1), 1.0, rtol=1e-6)
    assert set(clf.predict(X)) <= {"a", "b"}
    p2 = clone(clf).fit(X, y).predict_proba(X)
    np.testing.assert_allclose(p1, p2)  # deterministic given random_state
    reg = EchoRNNRegressor(hidden_size=6, epochs=2, estimator="bptt", random_state=0).fit(
        X, rng.normal(size=24)
    )
    assert reg.predict(X).shape == (24,)
    with pytest.raises(ValueError, match="estimator must be"):
        EchoRNNClassifier(estimator="magic", epochs=1).fit(X, y)


def test_homeostatic_grad_analytic_matches_autograd():
    from hel.homeostasis import homeostatic_loss_grad

    model = make_model("mean", n=5, cell="rate")
    phi = torch.randn(4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    value, grads = homeostatic_loss_grad(model.cell, phi)
    loss = homeostatic_loss(model.cell, phi)
    auto = torch.autograd.grad(loss, list(model.cell.parameters()), allow_unused=True)
    assert value == pytest.approx(float(loss.detach()), rel=1e-12)
    for g, a in zip(grads, auto, strict=True):
        torch.testing.assert_close(g, torch.zeros_like(g) if a is None else a)


def test_float64_passes_for_a_float32_model():
    model = make_model("mean", dtype=torch.float32)
    x, y, loss = make_batch("mean", dtype=torch.float32)
    est = HamiltonianEcho(model, loss, mode="linearized", dtype=torch.float64)
    grads = cell_grads(model, est, x, y)
    assert all(g.dtype == torch.float32 for g in grads)
    assert all(p.dtype == torch.float32 for p in model.parameters())
    ref_model = copy.deepcopy(model).double()
    ref = cell_grads(ref_model, BPTT(ref_model, loss), x.double(), y)
    for g, r in zip(grads, ref, strict=True):
        torch.testing.assert_close(g.double(), r, rtol=1e-5, atol=1e-6)


def test_homeostasis_accumulator_averages_steps():
    from hel import HomeostasisAccumulator

    model = make_model("mean", n=4, cell="rate")
    gen = torch.Generator().manual_seed(0)
    phis = [torch.randn(3, 4, dtype=torch.float64, generator=gen) for _ in range(5)]
    acc = HomeostasisAccumulator(model.cell)
    for p in phis:
        acc.update(p)
    full = homeostatic_loss(model.cell, torch.stack(phis))
    auto = torch.autograd.grad(full, [model.cell.W])[0]
    torch.testing.assert_close(acc.grads()[0], auto)
    with pytest.raises(ValueError, match="no step"):
        HomeostasisAccumulator(model.cell).grads()


# ------------------------------------------------------------------ issue 18: errors
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_parameters_raise_clear_error(dtype):
    model = make_model("mean").to(dtype)
    x, y, loss = make_batch("mean", dtype=torch.float32)
    for est in (HamiltonianEcho(model, loss), BPTT(model, loss), EProp(model, loss)):
        with pytest.raises(TypeError, match=f"dtype {dtype}.*model.float"):
            est.backward(x, y)


def test_unstable_dt_raises_on_non_finite_gradient():
    g = torch.Generator().manual_seed(0)
    model = EchoRNN(HopfieldOscillatorCell(1, 8, dt=5.0, generator=g), 2).double()
    x = 3 * torch.randn(2, 300, 1, generator=g, dtype=torch.float64)
    y = torch.tensor([0, 1])
    loss = torch.nn.CrossEntropyLoss()
    for est in (
        HamiltonianEcho(model, loss),
        HamiltonianEcho(model, loss, mode="linearized"),
        BPTT(model, loss),
    ):
        model.zero_grad(set_to_none=True)
        with pytest.raises(FloatingPointError, match=r"non-finite .*diverged.*dt = 5\.0"):
            est.backward(x, y)
        if isinstance(est, HamiltonianEcho):  # raises before accumulating into .grad
            assert model.cell.A.grad is None


def test_empty_batch_raises():
    model = make_model("mean")
    _, y, loss = make_batch("mean")
    x0 = torch.zeros(0, 10, 2, dtype=torch.float64)
    for est in (HamiltonianEcho(model, loss), BPTT(model, loss)):
        with pytest.raises(ValueError, match="empty batch"):
            est.backward(x0, y[:0])
    with pytest.raises(ValueError, match="empty batch"):
        model(x0)


def test_predict_before_fit_raises_not_fitted():
    from sklearn.exceptions import NotFittedError

    for est in (EchoRNNClassifier(), EchoRNNRegressor()):
        with pytest.raises(NotFittedError, match="not fitted"):
            est.predict(np.zeros((2, 1, 5)))


#: Checks the wrappers are expected to fail, with the reason (scikit-learn's own format).
SKLEARN_EXPECTED_FAILURES = {
    "check_classifiers_train": "tabular data read as a sequence of n_features steps; the "
    "2-epoch configuration used to keep the check fast does not reach its accuracy floor",
    "check_regressors_train": "same: 2 epochs of an oscillator RNN do not reach the check's "
    "R^2 floor on tabular data",
}


@pytest.mark.slow
@pytest.mark.parametrize("cls", [EchoRNNClassifier, EchoRNNRegressor])
def test_sklearn_check_estimator(cls):
    from sklearn.utils.estimator_checks import check_estimator

    failures = {
        k: v
        for k, v in SKLEARN_EXPECTED_FAILURES.items()
        if k.split("_")[1] in ("classifiers" if cls is EchoRNNClassifier else "regressors",)
    }
    check_estimator(cls(hidden_size=4, epochs=2, random_state=0), expected_failed_checks=failures)
