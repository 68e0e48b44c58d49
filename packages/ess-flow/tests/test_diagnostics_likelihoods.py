import math

import numpy as np
import pytest
import torch

from ess_flow import (
    ContactLikelihood,
    DistanceLikelihood,
    GaussianLikelihood,
    IndicatorLikelihood,
    MLPVelocity,
    PropertyTargetLikelihood,
    QuantizedGaussianLikelihood,
    SumLikelihood,
    Tempered,
    effective_sample_size,
    kabsch_rmsd,
    mmd_rbf,
    rhat,
    sliced_wasserstein,
    train_flow_matching,
)
from ess_flow.data import (
    eight_gaussians,
    ising_configs,
    ising_energy,
    lattice_properties,
    toy_chains,
    two_moons,
)


def _rotation(seed):
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((3, 3)))
    return q * np.sign(np.linalg.det(q))


def test_kabsch_rmsd_zero_for_rigid_copy_and_positive_otherwise():
    P = np.random.default_rng(0).standard_normal((10, 3))
    Q = P @ _rotation(1).T + np.array([1.0, -2.0, 3.0])
    assert kabsch_rmsd(P, Q) < 1e-10
    batch = np.stack([P, P + 0.1])
    r = kabsch_rmsd(batch, Q)
    assert r.shape == (2,)
    assert r[0] < 1e-10
    assert r[1] < 1e-10  # translation only
    mirrored = P * np.array([1.0, 1.0, -1.0])
    assert kabsch_rmsd(mirrored, P) > 0.1  # reflections are not allowed


def test_sliced_wasserstein_and_mmd():
    a = np.random.default_rng(0).standard_normal((500, 2))
    assert sliced_wasserstein(a, a) == 0.0
    b = a + np.array([1.0, 0.0])
    sw = sliced_wasserstein(a, b, n_projections=200)
    # a shift by 1 along e1: W2 of a projection onto u is |u_1|; sqrt(E u_1^2) = 1/sqrt(2)
    assert abs(sw - 1 / math.sqrt(2)) < 0.08
    assert mmd_rbf(a[:200], b[:200]) > mmd_rbf(a[:200], a[200:400])
    with pytest.raises(ValueError, match="dimension"):
        sliced_wasserstein(a, np.zeros((3, 3)))


def test_rhat_and_n_eff_on_iid_and_stuck_chains():
    rng = np.random.default_rng(0)
    iid = rng.standard_normal((400, 4, 2))
    assert np.all(np.abs(rhat(iid) - 1) < 0.05)
    ne = effective_sample_size(iid)
    assert np.all((ne > 1000) & (ne < 2400))
    stuck = iid + np.arange(4)[None, :, None] * 3.0
    assert np.all(rhat(stuck) > 1.5)
    # AR(1) with phi = 0.9 has n_eff / n = (1 - phi) / (1 + phi)
    x = np.zeros((4000, 4))
    for i in range(1, 4000):
        x[i] = 0.9 * x[i - 1] + rng.standard_normal(4)
    ne = effective_sample_size(x[:, :, None])[0]
    assert 0.6 * 16000 / 19 < ne < 1.5 * 16000 / 19
    with pytest.raises(ValueError, match="4 draws"):
        rhat(np.zeros((2, 3)))


def test_likelihood_values():
    x = torch.tensor([[0.0, 1.0], [1.0, 1.0]], dtype=torch.float64)
    g = GaussianLikelihood(None, torch.tensor([0.0, 1.0]), 0.5)
    ref = -0.5 * np.array([0.0, 4.0]) - 2 * (math.log(0.5) + 0.5 * math.log(2 * math.pi))
    np.testing.assert_allclose(g(x).numpy(), ref)
    p = PropertyTargetLikelihood(lambda x: x[:, :1], 0.0, 0.5)
    np.testing.assert_allclose(p(x).numpy() - p(x).numpy()[0], [0.0, -2.0])
    q = QuantizedGaussianLikelihood(None, torch.tensor([1.0]), 0.05, step=0.5)
    vals = q(torch.tensor([[0.8], [1.2], [1.3]]))
    assert vals[0] == vals[1]
    assert vals[2] < vals[0] - 40
    ind = IndicatorLikelihood(lambda x: x[:, 0] > 0.5)
    assert ind(x).tolist() == [-math.inf, 0.0]
    s = SumLikelihood(g, Tempered(g, 2.0))
    torch.testing.assert_close(s(x), 3 * g(x))
    with pytest.raises(ValueError, match="sigma"):
        GaussianLikelihood(None, 0.0, -1.0)
    with pytest.raises(ValueError, match="beta"):
        Tempered(g, 0.0)
    with pytest.raises(ValueError, match="at least one"):
        SumLikelihood()


def test_distance_and_contact_likelihoods():
    pts = torch.tensor([[[0.0, 0, 0], [3.0, 0, 0], [0, 4.0, 0]]])
    d = DistanceLikelihood([(0, 1), (1, 2)], torch.tensor([3.0, 5.0]), 0.5)
    assert math.isclose(
        float(d(pts)), 2 * (-math.log(0.5) - 0.5 * math.log(2 * math.pi)), rel_tol=1e-6
    )
    # flat input and per-sample pairs give the same value
    per = DistanceLikelihood(torch.tensor([[[0, 1], [1, 2]]]), torch.tensor([[3.0, 5.0]]), 0.5)
    torch.testing.assert_close(per(pts.reshape(1, 9)), d(pts))
    c = ContactLikelihood([(0, 1), (1, 2)], torch.tensor([True, False]), 4.0, 0.1)
    assert math.isclose(float(c(pts)), 2 * math.log(0.9), rel_tol=1e-6)
    with pytest.raises(ValueError, match="flip_prob"):
        ContactLikelihood([(0, 1)], torch.tensor([True]), 4.0, 0.7)
    with pytest.raises(ValueError, match="pairs"):
        DistanceLikelihood([0, 1], torch.tensor([1.0]), 0.5)


def test_data_generators():
    g = torch.Generator().manual_seed(0)
    x = eight_gaussians(4000, generator=g)
    r = x.norm(dim=1)
    assert abs(float(r.mean()) - 2.0) < 0.05
    assert two_moons(10, generator=g).shape == (10, 2)
    s = ising_configs(200, size=6, n_sweeps=50, generator=g)
    assert set(s.unique().tolist()) <= {-1.0, 1.0}
    e = ising_energy(s)
    assert float(e.min()) >= -2.0
    assert float(e.max()) <= 2.0
    assert float(e.mean()) < -0.5  # T = 2.5: ordered-ish, clearly below 0
    props = lattice_properties(torch.ones(1, 6, 6))
    torch.testing.assert_close(props, torch.tensor([[1.0, 1.0]]))
    ch = toy_chains(20, generator=g)
    bonds = (ch[:, 1:] - ch[:, :-1]).norm(dim=-1)
    torch.testing.assert_close(bonds, torch.full_like(bonds, 3.8), atol=1e-4, rtol=0)
    torch.testing.assert_close(ch[:, 0], torch.zeros(20, 3))
    assert float(ch[:, 1, 1:].abs().max()) < 1e-5
    assert float(ch[:, 2, 2].abs().max()) < 1e-5


@pytest.mark.slow
def test_flow_matching_training_reduces_loss():
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    data = eight_gaussians(2000, generator=g)
    net = MLPVelocity(2, hidden=32, n_layers=2)
    losses = train_flow_matching(net, data, n_steps=300, batch_size=128, lr=3e-3, generator=g)
    assert np.mean(losses[-50:]) < np.mean(losses[:50])
    with pytest.raises(ValueError, match="data"):
        train_flow_matching(net, torch.zeros(5), n_steps=1)
