import numpy as np
import preg_reference as reference
import pytest

from preg.theory import (
    majority_accuracy,
    preg_vs_sc,
    selected_accuracy_asymptotic,
    selected_accuracy_mc,
)


def test_majority_accuracy_exact_binomial():
    for k in (1, 2, 5, 8):
        for p in (0.2, 0.5, 0.7):
            want = reference.majority_accuracy(k, p)
            assert majority_accuracy(k, p) == pytest.approx(want, abs=1e-14)
    assert majority_accuracy(7, 0.5) == pytest.approx(0.5)


def test_asymptotic_matches_monte_carlo():
    for p in (0.3, 0.5, 0.7):
        asym = selected_accuracy_asymptotic(p, 0.5, 0.25)
        assert selected_accuracy_mc(p, 0.5, 1024, 256, reps=300, seed=1) == pytest.approx(
            asym, abs=0.005
        )
        assert selected_accuracy_mc(p, 0.5, 32, 8, reps=20000, seed=2) == pytest.approx(
            asym, abs=0.01
        )
    assert selected_accuracy_asymptotic(0.4, 0.5, 1.0) == 0.4
    with pytest.raises(ValueError, match="rho must be"):
        selected_accuracy_asymptotic(0.4, 0.5, 0.0)


def test_gain_curve_peaks_near_04():
    grid = np.round(np.arange(0.05, 1.0, 0.05), 2)
    gains = []
    for p in grid:
        preg, sc, m = preg_vs_sc(p, 0.5, 32, 8, 0.25, reps=20000, seed=0)
        gains.append(preg - sc)
    assert m == pytest.approx(14.0)
    assert abs(grid[int(np.argmax(gains))] - 0.4) <= 0.05 + 1e-9
    preg, sc, _ = preg_vs_sc(0.5, 0.5, 32, 8, 0.25, reps=20000, seed=0)
    assert sc == pytest.approx(0.5)
    assert preg == pytest.approx(0.80, abs=0.02)
