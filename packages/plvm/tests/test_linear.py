import numpy as np
import pytest

from plvm import PLVMLinear
from reference import gaussian_condition


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 2))
    A = z @ rng.normal(size=(2, 3)) + 0.3 * rng.normal(size=(n, 3)) + 1.0
    B = z @ rng.normal(size=(2, 4)) + 0.5 * rng.normal(size=(n, 4)) - 2.0
    B[: n // 4] = np.nan  # a quarter of the persons lack task B
    return z, {"A": A, "B": B}


def test_posterior_equals_brute_force_gaussian_conditioning():
    _, S = _data()
    m = PLVMLinear(2, max_iter=50).fit(S)
    mu, cov = m.posterior(S)
    for i in (0, 5, 200, 399):  # persons with A only and with A + B
        obs = [t for t in ("A", "B") if np.all(np.isfinite(S[t][i]))]
        W = np.vstack([m.W_[t] for t in obs])
        c = np.concatenate([m.c_[t] for t in obs])
        psi = np.concatenate([m.psi_[t] for t in obs])
        s = np.concatenate([S[t][i] for t in obs])
        ref_mu, ref_cov = gaussian_condition(W, c, psi, s)
        np.testing.assert_allclose(mu[i], ref_mu, atol=1e-8)
        np.testing.assert_allclose(cov[i], ref_cov, atol=1e-8)


def test_em_log_likelihood_is_non_decreasing():
    _, S = _data(seed=1)
    m = PLVMLinear(2, max_iter=200, tol=0.0, min_var=1e-6).fit(S)
    assert len(m.loglik_) > 50
    assert np.all(np.diff(m.loglik_) >= -1e-7 * abs(m.loglik_[-1]))


def test_no_task_gives_the_prior_and_head_predicts():
    z, S = _data()
    y = (z[:, 0] + z[:, 1] > 0).astype(float)
    m = PLVMLinear(2).fit(S, y)
    mu, cov = m.posterior({"A": np.full((3, 3), np.nan)})
    np.testing.assert_array_equal(mu, 0.0)
    np.testing.assert_allclose(cov, np.broadcast_to(np.eye(2), (3, 2, 2)))
    p = m.predict_proba(S)
    assert p.shape == (400, 2)
    assert np.allclose(p.sum(1), 1.0)


def test_bad_input():
    _, S = _data()
    with pytest.raises(ValueError, match="latent_dim"):
        PLVMLinear(0).fit(S)
    with pytest.raises(ValueError, match="binary"):
        PLVMLinear(2).fit(S, y=np.full(400, 2.0))
    m = PLVMLinear(2).fit(S)
    with pytest.raises(ValueError, match="unknown task"):
        m.posterior({"C": S["A"]})
    with pytest.raises(ValueError, match="without y"):
        m.predict_proba(S)
    with pytest.raises(ValueError, match="not fitted"):
        PLVMLinear(2).posterior(S)
