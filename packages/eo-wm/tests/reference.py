"""Slow, obviously correct float64 references the fast code is tested against."""

import math

import numpy as np


def stress_reference(drive, lam, tau):
    """S_t = lam S_{t-1} + max(0, a_t - tau), one 1-D series, plain Python."""
    s, out = 0.0, []
    for a in drive:
        s = lam * s + max(0.0, float(a) - tau)
        out.append(s)
    return out


def harmonic_baseline_reference(W, doy, H):
    """Least squares by the normal equations on an explicit design, evaluated at doy."""
    rows = [
        [1.0]
        + [math.cos(2 * math.pi * h * d / 365) for h in range(1, H + 1)]
        + [math.sin(2 * math.pi * h * d / 365) for h in range(1, H + 1)]
        for d in doy
    ]
    X = np.array(rows)
    coef = np.linalg.solve(X.T @ X, X.T @ np.asarray(W, dtype=np.float64))
    return X @ coef


def crps_reference(members, y):
    """CRPS of a 1-D ensemble by the double sum: mean|x_i - y| - 0.5 mean_ij |x_i - x_j|."""
    m = len(members)
    a = sum(abs(x - y) for x in members) / m
    b = sum(abs(xi - xj) for xi in members for xj in members) / (m * m)
    return a - 0.5 * b


def dhr_reference(pa, pb, ga, gb, thr=0.02):
    """Pooled directional hit rate by an explicit loop over pairs and steps."""
    hits = total = 0
    for i in range(len(pa)):
        for t in range(len(pa[i])):
            dg = ga[i][t] - gb[i][t]
            if abs(dg) > thr:
                total += 1
                hits += np.sign(pa[i][t] - pb[i][t]) == np.sign(dg)
    return hits / total
