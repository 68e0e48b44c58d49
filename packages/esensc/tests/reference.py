"""Float64 test references: brute-force Shapley values of bitmask-indexed games, a row counter."""

from __future__ import annotations

import itertools
import math

import numpy as np


def brute_force_shapley(v: np.ndarray) -> np.ndarray:
    """Shapley values by averaging marginal contributions over all n! orderings (n <= 8)."""
    n = int(np.log2(len(v)))
    phi = np.zeros(n)
    for order in itertools.permutations(range(n)):
        mask = 0
        for i in order:
            phi[i] += v[mask | (1 << i)] - v[mask]
            mask |= 1 << i
    return phi / math.factorial(n)


def game_from_dividends(n: int, dividends: dict[tuple[int, ...], float], v_empty=0.0):
    """v(S) = v(∅) + Σ_{T ⊆ S} d_T (Harsanyi dividends)."""
    v = np.full(1 << n, float(v_empty))
    for s in range(1 << n):
        members = {i for i in range(n) if s >> i & 1}
        v[s] += sum(d for T, d in dividends.items() if set(T) <= members)
    return v


def four_values(v: np.ndarray):
    """(v0, vN, v_single, v_minus) of a bitmask-indexed game."""
    n = int(np.log2(len(v)))
    full = (1 << n) - 1
    single = np.array([v[1 << i] for i in range(n)])
    minus = np.array([v[full ^ (1 << i)] for i in range(n)])
    return v[0], v[full], single, minus


class CountingModel:
    """Wraps a callable and counts the model rows it was asked to evaluate."""

    def __init__(self, f):
        self.f = f
        self.rows = 0
        self.calls = 0
        self.largest = 0

    def __call__(self, Z):
        self.rows += len(Z)
        self.calls += 1
        self.largest = max(self.largest, len(Z))
        return self.f(Z)
