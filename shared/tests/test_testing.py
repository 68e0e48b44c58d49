import numpy as np
import pytest

from methodkit.testing import (
    assert_grad_matches_autograd,
    finite_difference_grad,
    relative_error,
)


def _f(x):
    return float(np.sum(np.sin(x) * x**2))


def _grad(x):
    return np.cos(x) * x**2 + 2 * x * np.sin(x)


def test_finite_differences_match_the_analytic_gradient():
    x = np.linspace(-1.0, 2.0, 7).reshape(7, 1)
    np.testing.assert_allclose(finite_difference_grad(_f, x), _grad(x), rtol=1e-7, atol=1e-9)


def test_finite_differences_bad_input():
    with pytest.raises(ValueError, match="eps"):
        finite_difference_grad(_f, np.zeros(2), eps=0)
    with pytest.raises(ValueError, match="non-finite"):
        finite_difference_grad(lambda x: float("nan"), np.zeros(2))
    with pytest.raises(ValueError, match="shape mismatch"):
        relative_error(np.zeros(2), np.zeros(3))


def test_autograd_check_passes_and_bites():
    torch = pytest.importorskip("torch")
    w = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, dtype=torch.float64, requires_grad=True)
    x = torch.randn(5, 3, dtype=torch.float64)

    def loss():
        return ((x @ w + b) ** 2).sum()

    y = x @ w.detach() + b.detach()
    exact = [2 * x.T @ y, 2 * y.sum(0)]
    assert assert_grad_matches_autograd(loss, [w, b], exact, rtol=1e-12) < 1e-12
    with pytest.raises(AssertionError, match="relative error"):
        assert_grad_matches_autograd(loss, [w, b], [exact[0], exact[1] + 1e-3], rtol=1e-9)
    with pytest.raises(ValueError, match="gradient shape"):
        assert_grad_matches_autograd(loss, [w, b], [exact[1], exact[0]])
