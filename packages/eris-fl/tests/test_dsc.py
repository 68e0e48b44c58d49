"""Distributed Shifted Compression: unbiasedness, DIANA equivalence, convergence."""

import math

import pytest
import torch

from _eris_helpers import make_clients, make_mlp
from eris_fl import (
    ERISConfig,
    FedAvgConfig,
    Identity,
    LocalTrainer,
    RandK,
    StochasticQuant,
    flatten,
    run_fedavg,
    run_simulation,
)
from reference import centralised_diana


@pytest.mark.parametrize("comp", [RandK(0.25), StochasticQuant(2)])
def test_compressor_is_unbiased_with_declared_variance(comp):
    d, n = 8, 20_000
    v = torch.tensor([1.0, -2.0, 0.5, 3.0, 0.0, -1.0, 2.5, 0.25], dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    draws = torch.stack([comp(v, gen) for _ in range(n)])
    mean, sd = draws.mean(0), draws.std(0)
    assert ((mean - v).abs() <= 3 * sd / math.sqrt(n) + 1e-12).all()
    err = (draws - v).pow(2).sum(1).mean()
    assert err <= comp.omega(d) * v.pow(2).sum() * 1.05


def test_randk_omega_and_payload():
    comp = RandK(0.1)
    assert comp.k(4810) == 481
    assert comp.omega(4810) == pytest.approx(4810 / 481 - 1)
    assert comp.payload_bytes(4810) == 4 * 481
    assert RandK(0.1, seeded_indices=False).payload_bytes(4810) == 8 * 481
    gen = torch.Generator().manual_seed(4)
    out = comp(torch.ones(4810), gen)
    assert int((out != 0).sum()) == 481
    assert torch.equal(comp.support(4810, torch.Generator().manual_seed(4)), out != 0)


@pytest.mark.parametrize("A", [1, 3])
@pytest.mark.parametrize("comp", [RandK(0.2), StochasticQuant(4)])
def test_eris_dsc_equals_centralised_diana(A, comp):
    data = make_clients(5)
    trainer = LocalTrainer(batch_size=4)
    d = flatten(make_mlp()).numel()
    alpha = 1 / (1 + comp.omega(d))
    ref = centralised_diana(make_mlp(), data, trainer, comp, alpha, 4, seed=1, server_lr=0.9)
    cfg = ERISConfig(num_aggregators=A, compressor=comp, server_lr=0.9, seed=1)
    hist = run_simulation(make_mlp(), data, cfg, 4, trainer)
    torch.testing.assert_close(hist.params, ref, rtol=0, atol=1e-12)


def test_identity_compressor_with_alpha_one_is_fedavg():
    data = make_clients(5)
    trainer = LocalTrainer(batch_size=4)
    ref = run_fedavg(make_mlp(), data, FedAvgConfig(seed=3), 4, trainer).params
    cfg = ERISConfig(num_aggregators=2, compressor=Identity(), shift_alpha=1.0, seed=3)
    hist = run_simulation(make_mlp(), data, cfg, 4, trainer)
    torch.testing.assert_close(hist.params, ref, rtol=0, atol=1e-12)


class _Quadratic(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.x = torch.nn.Parameter(torch.zeros(d, dtype=torch.float64))


def _quadratic_problem(K=5, d=8, seed=0):
    gen = torch.Generator().manual_seed(seed)
    mats, vecs = [], []
    for _ in range(K):
        Q = torch.randn(d, d, generator=gen, dtype=torch.float64)
        mats.append(Q @ Q.T / d + torch.eye(d, dtype=torch.float64))
        vecs.append(3 * torch.randn(d, generator=gen, dtype=torch.float64))  # heterogeneous
    H = sum(mats) / K
    x_star = torch.linalg.solve(H, sum(vecs) / K)
    L = max(float(torch.linalg.eigvalsh(M).max()) for M in mats)
    return mats, vecs, x_star, L


def test_dsc_converges_where_plain_randk_stalls():
    K, d = 5, 8
    mats, vecs, x_star, L = _quadratic_problem(K, d)
    comp = RandK(0.5)  # omega = 1
    gamma = 1 / (L * (1 + 6 * comp.omega(d) / K))
    data = [(torch.zeros(1, 1), torch.zeros(1)) for _ in range(K)]
    client_of = {id(t): k for k, t in enumerate(data)}

    def full_gradient_step(model, x_t, dataset, gen):
        k = client_of[id(dataset)]
        return -gamma * (mats[k] @ x_t - vecs[k])  # u_k = -gamma * grad f_k(x_t)

    cfg = dict(num_aggregators=2, weights="uniform", seed=0)
    dsc = run_simulation(
        _Quadratic(d), data, ERISConfig(compressor=comp, **cfg), 600, full_gradient_step
    )
    plain = run_fedavg(
        _Quadratic(d),
        data,
        FedAvgConfig(compressor=comp, weights="uniform"),
        600,
        full_gradient_step,
    )
    err_dsc = float(torch.linalg.vector_norm(dsc.params - x_star))
    err_plain = float(torch.linalg.vector_norm(plain.params - x_star))
    assert err_dsc < 1e-6
    assert err_plain > 1e-3  # the compression noise floor of unshifted rand-k


def test_topk_keeps_the_largest_and_is_flagged_biased():
    from eris_fl import TopK

    v = torch.tensor([0.1, -5.0, 2.0, 0.3])
    out = TopK(0.5)(v)
    assert torch.equal(out, torch.tensor([0.0, -5.0, 2.0, 0.0]))
    assert not TopK(0.5).unbiased


def test_local_dp_baseline_clips_and_adds_noise():
    data = make_clients(4)
    trainer = LocalTrainer(batch_size=4)
    seen = []
    run_fedavg(make_mlp(), data, FedAvgConfig(clip=1e-3), 1, trainer, tap=seen.append)
    norms = [float(torch.linalg.vector_norm(m)) for m in seen[0].messages.values()]
    assert max(norms) <= 1e-3 * (1 + 1e-9)
    seen.clear()
    cfg = FedAvgConfig(clip=1e-3, noise_multiplier=10.0)
    run_fedavg(make_mlp(), data, cfg, 1, trainer, tap=seen.append)
    msg = next(iter(seen[0].messages.values()))
    # noise sd 1e-2 per coordinate dominates the clipped update (norm <= 1e-3)
    assert float(msg.std()) == pytest.approx(1e-2, rel=0.3)
