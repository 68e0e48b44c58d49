"""Slow, obviously correct float64 references (numpy)."""

from __future__ import annotations

import numpy as np


def centering(n: int) -> np.ndarray:
    """H_n = I - 1 1^T / n."""
    return np.eye(n) - np.ones((n, n)) / n


def double_center_ref(X: np.ndarray) -> np.ndarray:
    """H_N X H_M with explicit matrices."""
    return centering(X.shape[0]) @ X @ centering(X.shape[1])


def sinkhorn_ref(K: np.ndarray, r: np.ndarray, c: np.ndarray, iters: int = 100000, tol=1e-12):
    """Multiplicative Sinkhorn-Knopp: diag(u) K diag(v) with row sums r and column sums c."""
    u, v = np.ones(len(r)), np.ones(len(c))
    for _ in range(iters):
        u = r / (K @ v)
        v = c / (K.T @ u)
        P = u[:, None] * K * v[None]
        if max(np.abs(P.sum(1) - r).max(), np.abs(P.sum(0) - c).max()) < tol:
            break
    return P


def random_polytope_point(rng: np.random.Generator, N: int, M: int):
    """A strictly positive P in T(1, c) with random c (sum c = N)."""
    c = rng.uniform(0.2, 1.0, M)
    c = c / c.sum() * N
    r = np.ones(N)
    return sinkhorn_ref(rng.uniform(0.05, 1.0, (N, M)), r, c), r, c


def sinkhorn_log_ref(Z: np.ndarray, r: np.ndarray, c: np.ndarray, iters: int = 200000, tol=1e-12):
    """Plain log-domain Sinkhorn sweeps (no Newton), float64, for kernels exp(Z) of any range."""
    from scipy.special import logsumexp

    a, b = np.zeros(len(r)), np.zeros(len(c))
    for _ in range(iters):
        a = np.log(r) - logsumexp(Z + b[None], axis=1)
        b = np.log(c) - logsumexp(Z + a[:, None], axis=0)
        P = np.exp(Z + a[:, None] + b[None])
        if np.abs(P.sum(1) - r).max() < tol:
            break
    return P


def random_canonical_batch(rng: np.random.Generator, B: int, scale: float, N: int = 16, M: int = 7):
    """B padded random canonical matrices (entries up to +-scale before centring) with masks.

    Sizes n in [2, N], m in [2, M]; r = 1, c uniform in [0.2, 1] rescaled to sum n.
    """
    Z, r, c = np.zeros((B, N, M)), np.zeros((B, N)), np.zeros((B, M))
    for i in range(B):
        n, m = int(rng.integers(2, N + 1)), int(rng.integers(2, M + 1))
        ci = rng.uniform(0.2, 1.0, m)
        Z[i, :n, :m] = double_center_ref(rng.uniform(-scale, scale, (n, m)))
        r[i, :n], c[i, :m] = 1.0, ci / ci.sum() * n
    return Z, r, c, r > 0, c > 0
