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
