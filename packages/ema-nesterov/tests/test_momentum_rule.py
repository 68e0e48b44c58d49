"""The momentum-matched beta: its formula, and the slow-mode invariance it rests on."""

import math

import numpy as np
import pytest
import torch

from ema_nesterov import momentum_gain, momentum_matched_beta


def _w():
    return [torch.nn.Parameter(torch.ones(2))]


def test_gain_of_sgd_momentum_and_of_normalised_bases():
    assert momentum_gain(torch.optim.SGD(_w(), lr=0.1)) == 1.0
    assert momentum_gain(torch.optim.SGD(_w(), lr=0.1, momentum=0.9)) == pytest.approx(10.0)
    sgd = torch.optim.SGD(_w(), lr=0.1, momentum=0.9, dampening=0.9)
    assert momentum_gain(sgd) == pytest.approx(1.0)
    assert momentum_gain(torch.optim.AdamW(_w())) == 1.0


def test_matched_beta_formula():
    sgd = torch.optim.SGD(_w(), lr=0.1, momentum=0.9)
    assert momentum_matched_beta(sgd) == pytest.approx(1 - 0.1 * math.sqrt(10))
    assert momentum_matched_beta(torch.optim.AdamW(_w())) == pytest.approx(0.9)
    heavy = torch.optim.SGD(_w(), lr=0.1, momentum=0.999)
    assert momentum_matched_beta(heavy) == 0.0  # clipped


def test_matched_beta_rejects_reference_outside_unit_interval():
    with pytest.raises(ValueError, match=r"reference_beta must be in \[0, 1\), got 1.0"):
        momentum_matched_beta(torch.optim.AdamW(_w()), reference_beta=1.0)


def _slow_rate(mu, beta, gamma, h):
    """1 - spectral radius of one step on f = h/2 x^2 (heavy-ball base, EMA lookahead)."""
    # state (theta, base increment b, m); y = theta + beta m; b' = mu b - h y; theta' = y + b'
    y = np.array([1.0, 0.0, beta])
    b = mu * np.array([0.0, 1.0, 0.0]) - h * y
    theta = y + b
    m = gamma * np.array([0.0, 0.0, 1.0]) + (1 - gamma) * (theta - np.array([1.0, 0.0, 0.0]))
    return 1 - max(abs(np.linalg.eigvals(np.array([theta, b, m]))))


@pytest.mark.parametrize("mu", [0.5, 0.9])
def test_best_beta_over_momentum_is_the_gd_one_at_the_gained_step(mu):
    """The rule's premise: argmax_beta rate(mu, h) ~= argmax_beta rate(0, h / (1 - mu))."""
    grid = np.linspace(0, 0.99, 100)
    gamma, h = 0.9, 1e-4
    best_mu = grid[np.argmax([_slow_rate(mu, b, gamma, h) for b in grid])]
    best_gd = grid[np.argmax([_slow_rate(0.0, b, gamma, h / (1 - mu)) for b in grid])]
    assert abs(best_mu - best_gd) <= 0.02
    # and 1 - beta* scales like sqrt(h): the rule's (1 - beta) * sqrt(G)
    best_gd_h = grid[np.argmax([_slow_rate(0.0, b, gamma, h) for b in grid])]
    assert (1 - best_mu) / (1 - best_gd_h) == pytest.approx(1 / math.sqrt(1 - mu), rel=0.15)
