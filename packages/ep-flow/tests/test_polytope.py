import numpy as np
import pytest
import torch

from ep_flow import (
    canonicalize,
    decode_occupancy,
    double_center,
    marginal_error,
    rebalance_on_support,
    sinkhorn_decode,
    unsmooth,
)
from reference import (
    double_center_ref,
    random_canonical_batch,
    random_polytope_point,
    sinkhorn_log_ref,
    sinkhorn_ref,
)

T = torch.tensor


@pytest.mark.parametrize("seed", range(25))
def test_round_trip_exact(seed):
    rng = np.random.default_rng(seed)
    N, M = int(rng.integers(2, 21)), int(rng.integers(2, 8))
    P, r, c = random_polytope_point(rng, N, M)
    Z = canonicalize(T(P), T(r), T(c), eps=0.0)
    back = sinkhorn_decode(Z, T(r), T(c))
    assert torch.allclose(back, T(P), atol=1e-8, rtol=0)
    # with smoothing, the smoothed matrix comes back and unsmooth recovers P
    Ze = canonicalize(T(P), T(r), T(c), eps=1e-3)
    Pu = unsmooth(sinkhorn_decode(Ze, T(r), T(c)), T(r), T(c), eps=1e-3)
    assert torch.allclose(Pu, T(P), atol=1e-8, rtol=0)


@pytest.mark.parametrize("seed", range(10))
def test_any_z_decodes_feasible_and_agrees_with_ot(seed):
    ot = pytest.importorskip("ot")
    rng = np.random.default_rng(100 + seed)
    N, M = int(rng.integers(2, 21)), int(rng.integers(2, 8))
    _, r, c = random_polytope_point(rng, N, M)
    Z = double_center_ref(rng.uniform(-50, 50, (N, M)))
    P = sinkhorn_decode(T(Z), T(r), T(c), n_iter=50000)
    assert float(marginal_error(P, T(r), T(c))) <= 1e-8
    assert float(P.min()) >= 0
    Z32 = double_center_ref(rng.uniform(-5, 5, (N, M)))
    P32 = sinkhorn_decode(T(Z32, dtype=torch.float32), T(r).float(), T(c).float(), n_iter=50000)
    assert P32.dtype == torch.float32
    assert float(marginal_error(P32.double(), T(r), T(c))) <= 1e-5
    Zs = double_center_ref(rng.uniform(-3, 3, (N, M)))
    Pot = ot.sinkhorn(r, c, -Zs, reg=1.0, numItermax=100000, stopThr=1e-13)
    Pz = sinkhorn_decode(T(Zs), T(r), T(c)).numpy()
    assert np.abs(Pz - Pot).max() <= 1e-6
    assert np.abs(Pz - sinkhorn_ref(np.exp(Zs), r, c)).max() <= 1e-8


def test_double_center_properties_and_padding():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3, 6, 5))
    rm = T([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4]).bool()
    cm = T([[1] * 5, [1] * 3 + [0] * 2, [1] * 5]).bool()
    Z = double_center(T(X), rm, cm)
    assert torch.allclose(double_center(Z, rm, cm), Z, atol=1e-12)  # idempotent
    for b in range(3):
        n, m = int(rm[b].sum()), int(cm[b].sum())
        assert np.allclose(Z[b, :n, :m].numpy(), double_center_ref(X[b, :n, :m]), atol=1e-12)
        assert float(Z[b].abs().sum() - Z[b, :n, :m].abs().sum()) == 0.0  # padding is zero
    X2 = X.copy()
    X2[1, 4:, :] = 1e6  # garbage in padded rows is ignored
    assert torch.allclose(double_center(T(X2), rm, cm), Z)


def test_canonicalize_commutes_with_permutations():
    rng = np.random.default_rng(3)
    P, r, c = random_polytope_point(rng, 7, 4)
    Z = canonicalize(T(P), T(r), T(c))
    pr, pc = rng.permutation(7), rng.permutation(4)
    Zp = canonicalize(T(P[pr][:, pc]), T(r[pr]), T(c[pc]))
    assert torch.allclose(Zp, Z[pr][:, pc], atol=1e-12)


def test_ordered_crystal_survives_full_decoder():
    P = np.zeros((6, 4))
    P[[0, 1], 0] = 1
    P[[2, 3, 4], 1] = 1
    P[5, 3] = 1  # one vacant candidate site, no atom of column 2 ...
    P[:, 2] = 0
    P = P[:, [0, 1, 3]]
    r, c = np.ones(6), P.sum(0)
    Z = canonicalize(T(P), T(r), T(c), eps=1e-3)
    back = decode_occupancy(Z, T(r), T(c), eps=1e-3)
    assert np.abs(back.numpy() - P).max() <= 1e-6


def test_rebalance_reports_infeasible_support():
    P = T([[1.0, 0.0], [1.0, 0.0]])  # column 2 has no support but needs mass 1
    _, ok = rebalance_on_support(P, T([1.0, 1.0]), T([1.0, 1.0]), n_iter=50)
    assert not bool(ok)


def test_gradients_flow_through_decoder():
    rng = np.random.default_rng(1)
    _, r, c = random_polytope_point(rng, 5, 3)
    Z = T(double_center_ref(rng.normal(size=(5, 3))), requires_grad=True)
    P = sinkhorn_decode(Z, T(r), T(c))
    (P * T(rng.normal(size=(5, 3)))).sum().backward()
    assert Z.grad is not None
    assert torch.isfinite(Z.grad).all()


def test_bad_inputs():
    P = torch.ones(3, 2) / 2
    r, c = torch.ones(3), torch.full((2,), 1.5)
    with pytest.raises(ValueError, match="eps must be in"):
        canonicalize(P, r, c, eps=0.5)
    with pytest.raises(ValueError, match="eps must be in"):
        canonicalize(P, r, c, eps=-0.1)
    Pz = T([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    with pytest.raises(ValueError, match="strictly positive"):
        canonicalize(Pz, r, c, eps=0.0)
    with pytest.raises(ValueError, match="negative, NaN or infinite"):
        canonicalize(T([[1.5, -0.5], [0.0, 1.0], [0.5, 0.5]]), r, c)
    with pytest.raises(ValueError, match="row_mask has shape"):
        double_center(P, row_mask=torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match="col_mask has shape"):
        sinkhorn_decode(P, r, c, col_mask=torch.ones(5, dtype=torch.bool))
    with pytest.raises(ValueError, match="T\\(r, c\\) is empty"):
        sinkhorn_decode(P, r, torch.ones(2))
    Z = double_center(T(np.random.default_rng(0).uniform(-50, 50, (12, 6))))
    with pytest.raises(RuntimeError, match="residual"):
        sinkhorn_decode(Z, torch.ones(12, dtype=torch.float64), torch.full((6,), 2.0,
                        dtype=torch.float64), n_iter=3)  # fmt: skip


# The 151st matrix of the issue-47 sweep (entries up to +-60): two blocks coupled only by
# entries of 1e-14 after 30 sweeps; the old Newton polish stalled here at residual 0.27.
DECOUPLED_C = [0.8182, 0.4513, 0.4526, 0.2778]
DECOUPLED_Z = [[-21.04, 16.985, -24.856, 28.911], [21.04, -16.985, 24.856, -28.911]]


def test_decoder_converges_where_newton_stalls():
    Z = double_center(T(DECOUPLED_Z, dtype=torch.float64))
    c = T(DECOUPLED_C, dtype=torch.float64)
    c = c / c.sum() * 2
    r = torch.ones(2, dtype=torch.float64)
    P = sinkhorn_decode(Z, r, c)  # default n_iter
    assert float(marginal_error(P, r, c)) <= 1e-9
    ref = sinkhorn_log_ref(Z.numpy(), r.numpy(), c.numpy())
    assert np.abs(P.numpy() - ref).max() <= 1e-8


@pytest.mark.parametrize(("scale", "dtype", "tol"), [(60, torch.float64, 1e-9),
                                                     (1000, torch.float64, 1e-9),
                                                     (60, torch.float32, 1e-5)])  # fmt: skip
def test_decoder_converges_on_extreme_random_batches(scale, dtype, tol):
    rng = np.random.default_rng(scale)
    Z, r, c, rm, cm = (T(x) for x in random_canonical_batch(rng, 200, scale))
    Z, r, c = Z.to(dtype), r.to(dtype), c.to(dtype)
    P = sinkhorn_decode(Z, r, c, row_mask=rm, col_mask=cm)  # default n_iter, never raises
    assert P.dtype == dtype
    assert torch.isfinite(P).all()
    assert float(P.min()) >= 0
    assert float(marginal_error(P.double(), r.double(), c.double(), rm, cm).max()) <= tol


@pytest.mark.slow
def test_decoder_sweep_few_thousand_matrices():
    # 3000 matrices (2000 at +-60, 500 at +-200, 500 at +-1000), 3 seeds of each; the worst
    # residual must stay within tol (1e-9) and every matrix must decode
    worst = 0.0
    for scale, B in ((60, 2000), (200, 500), (1000, 500)):
        rng = np.random.default_rng(7 + scale)
        Z, r, c, rm, cm = (T(x) for x in random_canonical_batch(rng, B, scale))
        P = sinkhorn_decode(Z, r, c, row_mask=rm, col_mask=cm)
        assert float(P.min()) >= 0
        worst = max(worst, float(marginal_error(P, r, c, rm, cm).max()))
    assert worst <= 1e-9


def test_non_finite_and_bad_tolerances_are_refused():
    r, c = torch.ones(3, dtype=torch.float64), torch.full((2,), 1.5, dtype=torch.float64)
    Z = double_center(
        torch.randn(3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    )
    P = torch.full((3, 2), 0.5, dtype=torch.float64)
    with pytest.raises(ValueError, match="Z has 1 non-finite entries"):
        sinkhorn_decode(torch.where(Z.min() < Z, Z, torch.nan), r, c)
    with pytest.raises(ValueError, match="r has 1 non-finite entries"):
        sinkhorn_decode(Z, torch.tensor([1.0, float("nan"), 1.0], dtype=torch.float64), c)
    with pytest.raises(ValueError, match="c has 2 non-finite entries"):
        sinkhorn_decode(Z, r, torch.full((2,), float("inf"), dtype=torch.float64))
    for tol in (0.0, -1e-9, float("nan")):
        with pytest.raises(ValueError, match="tol must be a finite number > 0"):
            sinkhorn_decode(Z, r, c, tol=tol)
        with pytest.raises(ValueError, match="tol must be a finite number > 0"):
            rebalance_on_support(P, r, c, tol=tol)
    with pytest.raises(ValueError, match="negative, NaN or infinite"):
        canonicalize(torch.where(P > 0, float("inf"), 0.0).double(), r, c)
    with pytest.raises(ValueError, match="P has 6 non-finite entries"):
        rebalance_on_support(torch.full_like(P, float("nan")), r, c)
    with pytest.raises(ValueError, match="n_iter must be >= 1"):
        rebalance_on_support(P, r, c, n_iter=0)
    with pytest.raises(ValueError, match="marginals r and c must be positive"):
        rebalance_on_support(P, r, torch.tensor([3.0, 0.0], dtype=torch.float64))
