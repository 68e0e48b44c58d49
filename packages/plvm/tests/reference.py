"""Slow, obviously correct float64 references the fast code is tested against."""

import itertools

import numpy as np


def poe_reference(mus, variances):
    """Product of 1-D Gaussian densities N(m_k, v_k) and the prior N(0, 1), by precision sums."""
    prec = 1.0 + sum(1.0 / float(v) for v in variances)
    mean = sum(float(m) / float(v) for m, v in zip(mus, variances, strict=True)) / prec
    return mean, 1.0 / prec


def poe_numeric(mus, variances):
    """The same product by brute-force numerical integration of the density on a grid."""
    grid = np.linspace(-12, 12, 240001)
    logp = -0.5 * grid**2
    for m, v in zip(mus, variances, strict=True):
        logp = logp - 0.5 * (grid - m) ** 2 / v
    p = np.exp(logp - logp.max())
    p /= p.sum()
    mean = float((p * grid).sum())
    return mean, float((p * (grid - mean) ** 2).sum())


def gaussian_condition(W, c, psi, s):
    """Posterior of z given s under the joint Gaussian of (z, s), z ~ N(0, I).

    Cov(z) = I, Cov(z, s) = W^T, Cov(s) = W W^T + diag(psi); condition by the Schur complement.
    """
    W = np.asarray(W, dtype=np.float64)
    D = W.shape[1]
    S_ss = W @ W.T + np.diag(psi)
    S_zs = W.T
    gain = S_zs @ np.linalg.inv(S_ss)
    mean = gain @ (np.asarray(s, dtype=np.float64) - c)
    cov = np.eye(D) - gain @ S_zs.T
    return mean, cov


def mean_run_length_reference(zones):
    """Events per visit from a list of zone ids, by counting runs one by one."""
    runs = 1
    for a, b in itertools.pairwise(zones):
        if a != b:
            runs += 1
    return len(zones) / runs
