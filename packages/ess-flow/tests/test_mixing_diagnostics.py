"""Rank-normalised R-hat and bulk / tail ESS (Vehtari et al. 2021) against ArviZ, and the
mixing warning every ``ESSFlow.run`` issues when they say the answer is not reliable yet."""

import math
import warnings

import numpy as np
import pytest
import torch

from ess_flow import (
    ESSFlow,
    GaussianLikelihood,
    MixingWarning,
    ess_bulk,
    ess_tail,
    rank_rhat,
)


def _fixed_chains(n, m, d, phi, seed):
    """AR(1) chains with coefficient ``phi`` (negative: antithetic), offset per chain; the
    last coordinate is rounded so that ranks have ties."""
    rng = np.random.default_rng(seed)
    e = rng.standard_normal((n + 50, m, d))
    x = np.zeros_like(e)
    for t in range(1, n + 50):
        x[t] = phi * x[t - 1] + e[t]
    x = x[50:] + 0.15 * np.arange(m)[None, :, None]
    x[..., -1] = np.round(x[..., -1])
    return x


CASES = [  # (n_draws, n_chains, dims, phi): odd / even draws, short chains, antithetic
    (101, 4, 3, 0.9),
    (200, 8, 2, 0.5),
    (7, 3, 2, 0.3),
    (1000, 2, 2, 0.99),
    (300, 4, 2, -0.6),
    (64, 1, 2, 0.7),
]


@pytest.mark.parametrize(("n", "m", "d", "phi"), CASES)
def test_bulk_tail_ess_and_rank_rhat_match_arviz(n, m, d, phi):
    array_stats = pytest.importorskip("arviz_stats.base").array_stats
    x = _fixed_chains(n, m, d, phi, seed=n + m)
    a = x.transpose(2, 1, 0)  # ArviZ: (..., chain, draw)
    ref_bulk = array_stats.ess(a, chain_axis=-2, draw_axis=-1, method="bulk")
    ref_tail = array_stats.ess(a, chain_axis=-2, draw_axis=-1, method="tail", prob=0.05)
    np.testing.assert_allclose(ess_bulk(x), ref_bulk, rtol=1e-10)
    np.testing.assert_allclose(ess_tail(x), ref_tail, rtol=1e-10)
    if m >= 2:  # ArviZ needs two chains for R-hat
        ref_rhat = array_stats.rhat(a, chain_axis=-2, draw_axis=-1, method="rank")
        np.testing.assert_allclose(rank_rhat(x), ref_rhat, rtol=1e-12)


def test_iid_draws_have_rhat_near_one_and_full_ess():
    x = np.random.default_rng(0).standard_normal((1000, 8, 3))
    # iid: ESS ~ 8000 with relative sd ~ sqrt(2 / 8000) * few; R-hat - 1 ~ 1 / n.
    assert np.all(np.abs(ess_bulk(x) / 8000 - 1) < 0.1)
    assert np.all(np.abs(ess_tail(x) / 8000 - 1) < 0.25)
    assert np.all(rank_rhat(x) < 1.005)


def test_chains_at_different_locations_have_large_rhat():
    x = np.random.default_rng(1).standard_normal((200, 4, 1)) + np.arange(4)[None, :, None]
    assert rank_rhat(x)[0] > 1.3


def test_ess_tail_rejects_bad_prob():
    with pytest.raises(ValueError, match=r"prob must be in \(0, 0.5\)"):
        ess_tail(np.zeros((10, 2, 1)), prob=0.7)
    with pytest.raises(ValueError, match="at least 4 draws"):
        rank_rhat(np.zeros((3, 2, 1)))


def _linear_sampler(sigma):
    return ESSFlow(lambda z: z, GaussianLikelihood(None, torch.ones(2), sigma), (2,))


def test_every_run_returns_per_coordinate_diagnostics():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MixingWarning)
        res = _linear_sampler(0.5).run(8, 40, burn_in=10, seed=0)
    z = res.z.double().numpy()
    np.testing.assert_array_equal(res.rhat, rank_rhat(z))
    np.testing.assert_array_equal(res.ess_bulk, ess_bulk(z))
    np.testing.assert_array_equal(res.ess_tail, ess_tail(z))
    assert res.rhat.shape == res.ess_bulk.shape == res.ess_tail.shape == (2,)
    s = res.summary()
    assert s["ess_bulk_min"] == res.ess_bulk.min()
    assert s["rank_rhat_max"] == res.rhat.max()


def test_short_run_warns_naming_iterations_to_raise():
    with pytest.warns(MixingWarning, match=r"ESS per chain is .* raise the kept iterations"):
        res = _linear_sampler(0.05).run(4, 30, burn_in=10, seed=0)
    assert res.mixing_warning is not None
    assert "n_iter - burn_in" in res.mixing_warning


def test_chains_stuck_in_separate_modes_warn_on_rhat():
    def bimodal(x):  # sharp modes at x_0 = +-2: ESS never crosses between them
        return torch.logaddexp(
            -0.5 * ((x[:, 0] - 2) / 0.05) ** 2, -0.5 * ((x[:, 0] + 2) / 0.05) ** 2
        )

    init = torch.tensor([[2.0, 0.0], [2.0, 0.0], [-2.0, 0.0], [-2.0, 0.0]])
    s = ESSFlow(lambda z: z, bimodal, (2,))
    with pytest.warns(MixingWarning, match=r"R-hat is .* > 1.01 .* raise burn_in"):
        s.run(4, 200, init=init, seed=0, min_ess_per_chain=0.0)


def test_well_mixed_run_does_not_warn():
    s = ESSFlow(lambda z: z, lambda x: torch.zeros(x.shape[0]), (2,))
    with warnings.catch_warnings():
        warnings.simplefilter("error", MixingWarning)
        res = s.run(4, 600, burn_in=50, seed=0)
    assert res.mixing_warning is None
    assert math.isfinite(float(res.ess_bulk.min()))
