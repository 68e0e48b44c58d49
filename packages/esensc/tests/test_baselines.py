"""The shap baselines of ``esensc.baselines``: the same game, a budget in coalitions per row."""

import sys

import numpy as np
import pytest

import esensc
from esensc.baselines import esensc_budget, kernel_shap, permutation_shap


def model3(Z):
    return np.tanh(Z[:, 0] * Z[:, 1] - Z[:, 2]) + 0.5 * Z[:, 0] * Z[:, 1] * Z[:, 2]


def test_esensc_budget_is_2n_plus_2():
    assert esensc_budget(10) == 22


def test_kernel_shap_with_every_coalition_equals_exact_shapley(rng):
    pytest.importorskip("shap")
    bg, X = rng.normal(size=(8, 3)), rng.normal(size=(4, 3))
    got = kernel_shap(model3, bg, X, budget=64, l1_reg=False)
    np.testing.assert_allclose(got, esensc.exact_shapley(model3, bg, X), atol=1e-8)


def test_kernel_shap_is_seeded_and_leaves_the_global_rng_alone(rng):
    pytest.importorskip("shap")
    bg, X = rng.normal(size=(8, 6)), rng.normal(size=(3, 6))
    f = lambda Z: model3(Z[:, :3]) * Z[:, 3] + Z[:, 4] * Z[:, 5]  # noqa: E731
    np.random.seed(7)  # noqa: NPY002
    before = np.random.get_state()[1].copy()  # noqa: NPY002
    a = kernel_shap(f, bg, X, budget=14, seed=3)
    np.testing.assert_array_equal(np.random.get_state()[1], before)  # noqa: NPY002
    np.testing.assert_array_equal(kernel_shap(f, bg, X, budget=14, seed=3), a)


@pytest.mark.slow  # shap's PermutationExplainer JIT-compiles with numba on first use
def test_permutation_shap_is_efficient(rng):
    pytest.importorskip("shap")
    bg, X = rng.normal(size=(8, 4)), rng.normal(size=(3, 4))
    f = lambda Z: model3(Z[:, :3]) + Z[:, 3]  # noqa: E731
    phi = permutation_shap(f, bg, X, budget=esensc_budget(4), seed=0)
    np.testing.assert_allclose(phi.sum(1), f(X) - f(bg).mean(), atol=1e-10)


def test_budget_and_link_are_validated(rng):
    pytest.importorskip("shap")
    bg, X = rng.normal(size=(4, 3)), rng.normal(size=(2, 3))
    with pytest.raises(ValueError, match="budget must be an int >= 1"):
        kernel_shap(model3, bg, X, budget=0)
    with pytest.raises(ValueError, match="link must be one of"):
        permutation_shap(model3, bg, X, budget=8, link="probit")


def test_without_shap_the_error_names_the_extra(monkeypatch, rng):
    monkeypatch.setitem(sys.modules, "shap", None)  # makes `import shap` raise ImportError
    bg, X = rng.normal(size=(4, 3)), rng.normal(size=(2, 3))
    for baseline in (kernel_shap, permutation_shap):
        with pytest.raises(ImportError, match=r"esensc\[shap\]"):
            baseline(model3, bg, X, budget=8)
