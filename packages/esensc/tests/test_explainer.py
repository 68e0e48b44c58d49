"""Explainer-level exactness, budget, shapes and error paths with plain numpy models."""

import numpy as np
import pytest

import esensc
from esensc.maskers import Baseline, Independent
from reference import CountingModel, brute_force_shapley


def mlp_like(Z):
    """A nonlinear model with interactions of every order that ignores columns 2 and 4."""
    h = np.tanh(Z[:, [0, 1, 3, 5]] @ np.array([[0.7, -1.1], [0.4, 0.9], [-1.3, 0.2], [0.8, 0.6]]))
    return h @ np.array([1.5, -0.8]) + 0.3 * Z[:, 0] * Z[:, 1] * Z[:, 3]


def pairwise(Z):
    return Z @ np.array([1.0, -2.0, 0.5, 0.0, 3.0]) + 2.0 * Z[:, 0] * Z[:, 2] - Z[:, 1] * Z[:, 4]


@pytest.fixture
def data(rng):
    return rng.normal(size=(12, 6)), rng.normal(size=(5, 6))


def test_linear_model_gives_w_times_centered_x(rng):
    w, c = rng.normal(size=7), 0.3
    bg, X = rng.normal(size=(15, 7)), rng.normal(size=(4, 7))
    phi = esensc.Explainer(lambda Z: Z @ w + c, bg).attribute(X)
    np.testing.assert_allclose(phi, w * (X - bg.mean(0)), atol=1e-12)


def test_pairwise_interaction_model_equals_exact_shapley(rng):
    bg, X = rng.normal(size=(10, 5)), rng.normal(size=(6, 5))
    phi = esensc.Explainer(pairwise, bg).attribute(X)
    np.testing.assert_allclose(phi, esensc.exact_shapley(pairwise, bg, X), atol=1e-10)


def test_exact_shapley_matches_independent_brute_force(rng):
    bg, X = rng.normal(size=(7, 4)), rng.normal(size=(2, 4))
    f = lambda Z: np.sin(Z[:, 0] * Z[:, 1]) + Z[:, 2] * Z[:, 3] ** 2  # noqa: E731
    ref = []
    for x in X:
        v = np.array(
            [f(np.where((s >> np.arange(4)) & 1 == 1, x, bg)).mean()
             for s in range(16)]
        )  # fmt: skip
        ref.append(brute_force_shapley(v))
    np.testing.assert_allclose(esensc.exact_shapley(f, bg, X), np.array(ref), atol=1e-12)


def test_three_features_equals_exact_for_any_model(rng):
    bg, X = rng.normal(size=(9, 3)), rng.normal(size=(5, 3))
    f = lambda Z: np.exp(0.3 * Z[:, 0] * Z[:, 1] * Z[:, 2]) + np.sin(Z[:, 1])  # noqa: E731
    np.testing.assert_allclose(
        esensc.Explainer(f, bg).attribute(X), esensc.exact_shapley(f, bg, X), atol=1e-10
    )


def test_efficiency_and_exact_null_features(data):
    bg, X = data
    e = esensc.Explainer(mlp_like, bg)(X)
    total = mlp_like(X) - mlp_like(bg).mean()
    np.testing.assert_allclose(e.values.sum(1), total, atol=1e-10, rtol=0)
    np.testing.assert_allclose(e.base_values, mlp_like(bg).mean(), atol=1e-14)
    assert np.all(e.values[:, [2, 4]] == 0.0)
    assert np.all(e.values[:, [0, 1, 3, 5]] != 0.0)


def test_model_row_count_is_2n_plus_1_times_b_times_rows_plus_b(data):
    bg, X = data
    counted = CountingModel(mlp_like)
    ex = esensc.Explainer(counted, bg)
    ex.attribute(X)
    n, B = X.shape[1], len(bg)
    assert counted.rows == (2 * n + 1) * B * len(X) + B
    assert ex.n_model_evals(len(X)) == counted.rows


def test_fast_input_builder_matches_the_masked_where(rng):
    from esensc._game import leave_one_out_builder, leave_one_out_masks, mask_builder

    n, B, rows = 7, 5, 3
    X, bg = rng.normal(size=(rows, n)), rng.normal(size=(B, n))
    fast, ref = leave_one_out_builder(X, bg), mask_builder(X, bg, leave_one_out_masks(n))
    total = rows * (2 * n + 1)
    # ranges that start and end inside the single / leave-one-out runs and cross rows
    for q0, q1 in [(0, total), (0, 1), (3, 12), (6, 20), (14, 16), (13, 31), (40, total)]:
        np.testing.assert_array_equal(fast(q0, q1), ref(q0, q1))


def test_batch_size_bounds_calls_and_keeps_results(data):
    bg, X = data
    counted = CountingModel(mlp_like)
    ref = esensc.Explainer(mlp_like, bg).attribute(X)
    got = esensc.Explainer(counted, bg, batch_size=7).attribute(X)
    np.testing.assert_allclose(got, ref, atol=1e-12)
    assert counted.largest == 7  # B = 12 > 7: each coalition's rows are split in two calls
    assert counted.calls == 2 + 2 * (2 * 6 + 1) * 5  # v(∅): 7 + 5 rows
    assert counted.rows == esensc.Explainer(mlp_like, bg).n_model_evals(len(X))
    np.testing.assert_allclose(esensc.Explainer(mlp_like, bg).attribute(X, batch_size=1000), ref)


def test_deterministic_and_rowwise_consistent(data):
    bg, X = data
    ex = esensc.Explainer(mlp_like, bg)
    a = ex.attribute(X)
    np.testing.assert_array_equal(a, ex.attribute(X))
    one_by_one = np.vstack([ex.attribute(X[i : i + 1]) for i in range(len(X))])
    np.testing.assert_allclose(a, one_by_one, atol=1e-12)


def test_multi_output_shapes(data):
    bg, X = data
    f = lambda Z: np.stack([mlp_like(Z), pairwise(Z[:, :5]), Z[:, 0]], axis=1)  # noqa: E731
    e = esensc.Explainer(f, bg)(X)
    assert e.values.shape == (5, 6, 3)
    assert e.base_values.shape == (5, 3)
    np.testing.assert_allclose(e.values[..., 0], esensc.Explainer(mlp_like, bg).attribute(X))
    np.testing.assert_allclose(e.values.sum(1), f(X) - f(bg).mean(0), atol=1e-10)


def test_logit_link_is_applied_after_averaging(rng):
    bg, X = rng.normal(size=(8, 3)), rng.normal(size=(4, 3))
    p = lambda Z: 1 / (1 + np.exp(-(Z[:, 0] * Z[:, 1] + Z[:, 2])))  # noqa: E731
    phi = esensc.Explainer(p, bg, link="logit").attribute(X)
    logit = lambda q: np.log(q / (1 - q))  # noqa: E731
    np.testing.assert_allclose(phi.sum(1), logit(p(X)) - logit(p(bg).mean()), atol=1e-10)
    np.testing.assert_allclose(phi, esensc.exact_shapley(p, bg, X, link="logit"), atol=1e-10)


def test_weighted_background_equals_repeated_rows(rng):
    bg, X = rng.normal(size=(4, 6)), rng.normal(size=(3, 6))
    rep = np.repeat(bg, [1, 2, 3, 1], axis=0)
    a = esensc.Explainer(mlp_like, Independent(bg, weights=[1, 2, 3, 1])).attribute(X)
    np.testing.assert_allclose(a, esensc.Explainer(mlp_like, rep).attribute(X), atol=1e-12)


def test_baseline_vector_and_subsampling(rng):
    x0 = rng.normal(size=6)
    ex = esensc.Explainer(mlp_like, x0)
    assert isinstance(ex.masker, Baseline)
    assert len(ex.masker) == 1
    big = esensc.Explainer(mlp_like, rng.normal(size=(300, 6)))
    assert len(big.masker) == 100
    assert Independent(rng.normal(size=(300, 6)), max_samples=20).data.shape == (20, 6)


def test_dataframe_background_keeps_names_and_feeds_dataframes(rng):
    pd = pytest.importorskip("pandas")
    cols = list("abcdef")
    bg = pd.DataFrame(rng.normal(size=(6, 6)), columns=cols)
    seen = []

    def f(Z):
        seen.append(type(Z))
        return mlp_like(Z.to_numpy())

    X = pd.DataFrame(rng.normal(size=(2, 6)), columns=cols)
    e = esensc.Explainer(f, bg)(X)
    assert list(e.feature_names) == cols
    assert all(t is pd.DataFrame for t in seen)
    np.testing.assert_allclose(
        e.values, esensc.Explainer(mlp_like, bg.to_numpy()).attribute(X.to_numpy())
    )


@pytest.mark.parametrize("rule", esensc.RULES)
def test_every_rule_is_efficient_on_a_model(data, rule):
    bg, X = data
    phi = esensc.Explainer(mlp_like, bg, rule=rule).attribute(X)
    np.testing.assert_allclose(phi.sum(1), mlp_like(X) - mlp_like(bg).mean(), atol=1e-10)


def test_sklearn_estimators_are_unwrapped(rng):
    sk = pytest.importorskip("sklearn.linear_model")
    Xtr = rng.normal(size=(60, 4))
    y = (Xtr[:, 0] + Xtr[:, 1] > 0).astype(int)
    clf = sk.LogisticRegression().fit(Xtr, y)
    # shap's default for a linear model: the margin (log-odds), exact for an additive game
    e = esensc.Explainer(clf, Xtr[:20])(Xtr[:3])
    np.testing.assert_allclose(e.values, clf.coef_[0] * (Xtr[:3] - Xtr[:20].mean(0)), atol=1e-12)
    proba = esensc.Explainer(clf, Xtr[:20], model_output="probability")(Xtr[:3])
    assert proba.values.shape == (3, 4, 2)
    np.testing.assert_allclose(proba.values.sum(1), clf.predict_proba(Xtr[:3]) - proba.base_values)
    reg = sk.LinearRegression().fit(Xtr, Xtr[:, 0])
    phi = esensc.Explainer(reg, Xtr[:20]).attribute(Xtr[:3])
    np.testing.assert_allclose(phi, reg.coef_ * (Xtr[:3] - Xtr[:20].mean(0)), atol=1e-12)


# ---------------------------------------------------------------- bad input


def test_width_mismatch_names_both(data):
    bg, X = data
    with pytest.raises(ValueError, match="X has 5 features per row but the background has 6"):
        esensc.Explainer(mlp_like, bg).attribute(X[:, :5])


def test_empty_background():
    with pytest.raises(ValueError, match="background data is empty"):
        esensc.Explainer(mlp_like, np.zeros((0, 6)))


def test_nan_output_names_the_coalition_kind(data):
    bg, X = data

    def f(Z):
        out = mlp_like(Z)
        out[(Z[:, 3] == X[0, 3]) & (Z[:, 0] != X[0, 0])] = np.nan  # only when 3 is in, 0 is out
        return out

    with pytest.raises(ValueError, match="NaN or inf on the single-feature coalition \\{3\\}"):
        esensc.Explainer(f, bg).attribute(X)
    with pytest.raises(ValueError, match="NaN or inf on the empty coalition"):
        esensc.Explainer(lambda Z: np.full(len(Z), np.inf), bg).attribute(X)


def test_wrong_leading_dimension(data):
    bg, X = data
    with pytest.raises(ValueError, match="leading dimension must equal the number of rows"):
        esensc.Explainer(lambda Z: mlp_like(Z)[:-1], bg).attribute(X)


def test_unknown_rule_link_and_negative_tol(data):
    bg, _ = data
    with pytest.raises(ValueError, match="rule must be one of"):
        esensc.Explainer(mlp_like, bg, rule="kernel")
    with pytest.raises(ValueError, match="link must be one of"):
        esensc.Explainer(mlp_like, bg, link="probit")
    with pytest.raises(ValueError, match="null_tol must be a finite number >= 0, got -1"):
        esensc.Explainer(mlp_like, bg, null_tol=-1)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        esensc.Explainer(mlp_like, bg, batch_size=0)


def test_three_d_input_suggests_flattening(rng):
    bg = rng.normal(size=(4, 6))
    with pytest.raises(ValueError, match="flatten"):
        esensc.Explainer(mlp_like, bg).attribute(rng.normal(size=(2, 2, 3)))
    with pytest.raises(ValueError, match="flatten"):
        esensc.Explainer(mlp_like, rng.normal(size=(4, 2, 3)))


def test_logit_link_needs_probabilities(data):
    bg, X = data
    with pytest.raises(ValueError, match="link='logit' needs model outputs in \\(0, 1\\)"):
        esensc.Explainer(mlp_like, bg, link="logit").attribute(X)


def test_bad_model_masker_and_names(data):
    bg, _ = data
    with pytest.raises(TypeError, match="model must be a callable"):
        esensc.Explainer(object(), bg)
    with pytest.raises(TypeError, match="masker must be"):
        esensc.Explainer(mlp_like, None)
    with pytest.raises(ValueError, match="feature_names has 2 names"):
        esensc.Explainer(mlp_like, bg, feature_names=["a", "b"])
    with pytest.raises(ValueError, match="weights must have shape"):
        Independent(bg, weights=[1.0, 2.0])


@pytest.mark.parametrize("per_block", [1, 3, 7, 14, 15, 16, 29, 40])
def test_reused_buffer_blocks_match_the_masked_where_in_call_order(rng, per_block):
    # the explainer asks for consecutive blocks of per_block pairs; the builder rewrites one
    # buffer and only restores / writes columns where a slot keeps its base
    from esensc._game import leave_one_out_builder, leave_one_out_masks, mask_builder

    n, B, rows = 7, 5, 3
    X, bg = rng.normal(size=(rows, n)), rng.normal(size=(B, n))
    fast, ref = leave_one_out_builder(X, bg), mask_builder(X, bg, leave_one_out_masks(n))
    total = rows * (2 * n + 1)
    for _ in range(2):  # a second pass starts from a dirty buffer
        for q0 in range(0, total, per_block):
            q1 = min(q0 + per_block, total)
            np.testing.assert_array_equal(fast(q0, q1), ref(q0, q1))


def test_masked_rows_are_read_only_views_of_one_buffer(rng):
    # the cost beyond the model: no (B, n) copy per coalition once a slot holds its base
    from esensc._game import leave_one_out_builder

    n, B = 40, 6
    build = leave_one_out_builder(rng.normal(size=(2, n)), rng.normal(size=(B, n)))
    first, second = build(0, 10), build(10, 20)
    assert np.shares_memory(first, second)
    assert not second.flags.writeable


def test_model_that_writes_into_its_input_fails_loudly(data):
    bg, X = data

    def scaling_in_place(Z):
        Z *= 2.0
        return Z.sum(axis=1)

    with pytest.raises(ValueError, match="read-only"):
        esensc.Explainer(scaling_in_place, bg).attribute(X)
