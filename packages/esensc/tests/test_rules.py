"""Rule-level exactness and axioms on explicit games (no model involved)."""

import numpy as np
import pytest

from esensc import RULES, esensc_values, shapley_from_values
from reference import brute_force_shapley, four_values, game_from_dividends


def random_game(rng, n):
    v = rng.normal(size=1 << n)
    return v


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("rule", ["esensc", "esensc_plain"])
def test_equals_brute_force_shapley_for_n_le_3(rng, n, rule):
    for _ in range(20):
        v = random_game(rng, n)
        phi = esensc_values(*four_values(v), rule=rule)
        np.testing.assert_allclose(phi, brute_force_shapley(v), atol=1e-10, rtol=0)


@pytest.mark.parametrize("n", [2, 4, 6, 8])
def test_equals_shapley_for_pairwise_dividend_games(rng, n):
    for _ in range(3):
        active = rng.permutation(n)[: max(1, n - 2)]  # the rest are null players
        divs = {(int(i),): rng.normal() for i in active}
        for i in active:
            for j in active:
                if i < j and rng.random() < 0.7:
                    divs[(int(i), int(j))] = rng.normal()
        v = game_from_dividends(n, divs, v_empty=rng.normal())
        ref = shapley_from_values(v)
        for rule in ("esensc", "esensc_plain"):
            np.testing.assert_allclose(esensc_values(*four_values(v), rule=rule), ref, atol=1e-10)
        if n <= 6:
            np.testing.assert_allclose(ref, brute_force_shapley(v), atol=1e-12)


def test_shapley_from_values_matches_permutations(rng):
    v = rng.normal(size=1 << 5)
    np.testing.assert_allclose(shapley_from_values(v), brute_force_shapley(v), atol=1e-12)
    with pytest.raises(ValueError, match="2\\*\\*n"):
        shapley_from_values(np.zeros(6))


def test_order3_dividend_with_two_null_players():
    v = game_from_dividends(5, {(0, 1, 2): 1.0})
    np.testing.assert_allclose(
        esensc_values(*four_values(v)), [1 / 3, 1 / 3, 1 / 3, 0, 0], atol=1e-15
    )
    np.testing.assert_allclose(
        esensc_values(*four_values(v), rule="esensc_plain"), [0.4, 0.4, 0.4, -0.1, -0.1]
    )


def test_degenerate_game_warns_and_splits_equally():
    v = np.array([1.0 if bin(s).count("1") >= 2 else 0.0 for s in range(16)])
    with pytest.warns(RuntimeWarning, match="no active feature"):
        phi = esensc_values(*four_values(v))
    np.testing.assert_allclose(phi, [0.25] * 4)


@pytest.mark.parametrize("rule", RULES)
def test_efficiency_every_rule(rng, rule):
    for n in (1, 3, 5, 8):
        v = random_game(rng, n) * 10
        v0, vN, single, minus = four_values(v)
        phi = esensc_values(v0, vN, single, minus, rule=rule)
        assert abs(phi.sum() - (vN - v0)) < 1e-10


def test_null_players_get_exactly_zero(rng):
    n = 6
    divs = {(0,): 1.3, (1, 2): -0.7, (0, 1, 2): 2.0, (0, 2, 3): 0.5}  # 4 and 5 are null
    v = game_from_dividends(n, divs, v_empty=3.0)
    for rule in ("esensc", "proportional"):
        phi = esensc_values(*four_values(v), rule=rule)
        assert phi[4] == 0.0
        assert phi[5] == 0.0
        assert abs(phi.sum() - (v[-1] - v[0])) < 1e-12


def test_symmetric_players_get_equal_values(rng):
    divs = {(0,): 0.5, (1,): 0.5, (0, 2): 1.0, (1, 2): 1.0, (0, 1, 2, 3): 2.0, (3,): -1.0}
    v = game_from_dividends(4, divs)
    for rule in RULES:
        phi = esensc_values(*four_values(v), rule=rule)
        assert phi[0] == pytest.approx(phi[1], abs=1e-14)


def test_plain_midpoint_is_linear_in_the_game(rng):
    v, w = random_game(rng, 5), random_game(rng, 5)
    f = lambda g: esensc_values(*four_values(g), rule="esensc_plain")  # noqa: E731
    np.testing.assert_allclose(f(2.0 * v - 3.0 * w), 2.0 * f(v) - 3.0 * f(w), atol=1e-12)


def test_ensc_is_es_of_the_dual_game(rng):
    n = 5
    v = random_game(rng, n)
    full = (1 << n) - 1
    dual = np.array([v[full] - v[full ^ s] for s in range(1 << n)])
    np.testing.assert_allclose(
        esensc_values(*four_values(v), rule="ensc"),
        esensc_values(*four_values(dual), rule="es"),
        atol=1e-12,
    )


def test_es_and_ensc_formulas(rng):
    v = random_game(rng, 4)
    v0, vN, s, m = four_values(v)
    a, b = s - v0, vN - m
    np.testing.assert_allclose(esensc_values(v0, vN, s, m, "es"), a + (vN - v0 - a.sum()) / 4)
    np.testing.assert_allclose(esensc_values(v0, vN, s, m, "ensc"), b + (vN - v0 - b.sum()) / 4)


def test_plain_midpoint_equals_constrained_least_squares(rng):
    for n in (3, 5, 7):
        v = random_game(rng, n)
        v0, vN, single, minus = four_values(v)
        # rows: coalitions {i} and N\{i}; value v(S) - v0 ≈ Σ_{j∈S} φ_j, s.t. Σ φ = vN - v0
        A = np.vstack([np.eye(n), 1.0 - np.eye(n)])
        y = np.concatenate([single - v0, minus - v0])
        kkt = np.block([[2 * A.T @ A, np.ones((n, 1))], [np.ones((1, n)), np.zeros((1, 1))]])
        rhs = np.concatenate([2 * A.T @ y, [vN - v0]])
        sol = np.linalg.lstsq(kkt, rhs, rcond=None)[0][:n]
        np.testing.assert_allclose(
            esensc_values(v0, vN, single, minus, "esensc_plain"), sol, atol=1e-10
        )


def test_vectorised_over_leading_axes(rng):
    games = [random_game(rng, 4) for _ in range(6)]
    parts = [four_values(g) for g in games]
    v0 = np.array([p[0] for p in parts]).reshape(2, 3)
    vN = np.array([p[1] for p in parts]).reshape(2, 3)
    s = np.array([p[2] for p in parts]).reshape(2, 3, 4)
    m = np.array([p[3] for p in parts]).reshape(2, 3, 4)
    batched = esensc_values(v0, vN, s, m)
    one = np.array([esensc_values(*p) for p in parts]).reshape(2, 3, 4)
    np.testing.assert_allclose(batched, one, atol=1e-14)


def test_bad_inputs():
    z = np.zeros(3)
    with pytest.raises(ValueError, match="rule must be one of"):
        esensc_values(0, 1, z, z, rule="shapley")
    with pytest.raises(ValueError, match="null_tol must be"):
        esensc_values(0, 1, z, z, null_tol=-1e-3)
    with pytest.raises(TypeError, match="null_tol must be a float"):
        esensc_values(0, 1, z, z, null_tol="small")
    with pytest.raises(ValueError, match="same shape"):
        esensc_values(0, 1, z, np.zeros(4))
    with pytest.raises(ValueError, match="v_single contains NaN"):
        esensc_values(0, 1, np.array([0.0, np.nan, 0.0]), z)
    with pytest.raises(ValueError, match="no players"):
        esensc_values(0, 1, np.zeros(0), np.zeros(0))
