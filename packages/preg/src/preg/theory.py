"""Boundary-margin argument: why selecting confident prefixes helps most near p = 1/2.

Binary view: a path is correct with probability ``p``; prefix scores are ``N(delta, 1)`` for
correct and ``N(0, 1)`` for wrong paths (AUROC ``Phi(delta / sqrt 2)``). Keeping the top fraction
``rho`` gives, as ``N -> infinity``, ``p_sel = p Q(tau - delta) / rho`` with ``tau`` solving
``p Q(tau - delta) + (1 - p) Q(tau) = rho`` (``Q`` = Gaussian upper tail).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "majority_accuracy",
    "preg_vs_sc",
    "selected_accuracy_asymptotic",
    "selected_accuracy_mc",
]


def _q(x: float) -> float:
    return 0.5 * math.erfc(x / math.sqrt(2.0))


def _check_p(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")


def selected_accuracy_asymptotic(p: float, delta: float, rho: float) -> float:
    """``p_sel`` of the top-``rho`` fraction as ``N -> infinity`` (bisection on ``tau``)."""
    _check_p(p)
    if not 0.0 < rho <= 1.0:
        raise ValueError(f"rho must be in (0, 1], got {rho}")
    if rho == 1.0 or p in (0.0, 1.0):
        return p
    lo, hi = -40.0, 40.0
    for _ in range(200):
        tau = 0.5 * (lo + hi)
        mass = p * _q(tau - delta) + (1 - p) * _q(tau)
        if mass > rho:
            lo = tau
        else:
            hi = tau
    tau = 0.5 * (lo + hi)
    return p * _q(tau - delta) / rho


def _kept_correct(p: float, delta: float, n: int, k: int, reps: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    correct = rng.random((reps, n)) < p
    s = rng.standard_normal((reps, n)) + delta * correct
    top = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(correct, top, axis=1).sum(axis=1)


def selected_accuracy_mc(
    p: float, delta: float, n: int, k: int, reps: int = 20000, seed: int = 0
) -> float:
    """Monte Carlo ``p_sel``: fraction of correct paths among the top ``k`` of ``n``."""
    _check_p(p)
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    return float(_kept_correct(p, delta, n, k, reps, seed).mean() / k)


def majority_accuracy(k: int, p: float) -> float:
    """``P(Bin(k, p) > k/2)`` with ties counting half (exact binomial sum)."""
    _check_p(p)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    acc = 0.0
    for j in range(k + 1):
        pj = math.comb(k, j) * p**j * (1 - p) ** (k - j)
        if 2 * j > k:
            acc += pj
        elif 2 * j == k:
            acc += 0.5 * pj
    return acc


def preg_vs_sc(
    p: float, delta: float, n: int, k: int, ell: float, reps: int = 20000, seed: int = 0
) -> tuple[float, float, float]:
    """Binary-view accuracy of PreG vs equal-budget self-consistency.

    Args:
        p: per-path accuracy.
        delta: prefix-score separation.
        n: prefixes ``N``.
        k: kept ``K``.
        ell: prefix fraction ``l = L / T_bar``.
        reps: Monte Carlo repetitions for PreG.
        seed: seed of the Monte Carlo draws.

    Returns:
        ``(preg_accuracy, sc_accuracy, M)`` with ``M = N l + K (1 - l)`` and the SC accuracy
        interpolated linearly between ``floor(M)`` and ``ceil(M)``.
    """
    if not 0.0 <= ell <= 1.0:
        raise ValueError(f"ell must be in [0, 1], got {ell}")
    kc = _kept_correct(p, delta, n, k, reps, seed)
    preg = float(np.mean((2 * kc > k) + 0.5 * (2 * kc == k)))
    m = n * ell + k * (1 - ell)
    lo, hi = max(1, math.floor(m)), max(1, math.ceil(m))
    a_lo, a_hi = majority_accuracy(lo, p), majority_accuracy(hi, p)
    sc = a_lo if hi == lo else a_lo + (m - lo) * (a_hi - a_lo) / (hi - lo)
    return preg, sc, m
