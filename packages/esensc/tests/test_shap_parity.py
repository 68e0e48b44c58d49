"""esensc explains what ``shap.Explainer(model, background)`` explains, per model kind.

For each kind shap dispatches on, both explanations must have the same shape, the same base
values, and (both being efficient) the same ``values.sum(1) + base_values``, i.e. the same
model output on the same scale. Where shap rejects the model (other scikit-learn estimators,
pipelines, torch modules fed numpy rows) the reference is shap on the callable its users pass.
"""

import warnings

import numpy as np
import pytest

import esensc

N_FEATURES = 5


@pytest.fixture
def clf_data(rng):
    X = rng.normal(size=(160, N_FEATURES))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    return X, y


@pytest.fixture
def multi_data(rng):
    X = rng.normal(size=(160, N_FEATURES))
    y = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5])
    return X, y


def explain_both(model, X, *, shap_model=None):
    """(esensc explanation, shap explanation) on a 30-row background and 4 rows."""
    shap = pytest.importorskip("shap")
    bg, rows = X[:30], X[100:104]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # near-flat rows of tiny models
        ours = esensc.Explainer(model, bg)(rows)
    theirs = shap.Explainer(model if shap_model is None else shap_model, bg)(rows)
    return ours, theirs


def assert_same_output(ours, theirs, atol=1e-5):
    assert ours.values.shape == theirs.values.shape
    assert np.shape(ours.base_values) == np.shape(theirs.base_values)
    np.testing.assert_allclose(ours.base_values, theirs.base_values, atol=atol)
    np.testing.assert_allclose(
        ours.values.sum(1) + ours.base_values, theirs.values.sum(1) + theirs.base_values,
        atol=atol,
    )  # fmt: skip


def test_xgboost_classifier_explains_the_margin_like_tree_explainer(clf_data, multi_data):
    xgb = pytest.importorskip("xgboost")
    kw = dict(n_estimators=15, max_depth=3, n_jobs=1)
    ours, theirs = explain_both(xgb.XGBClassifier(**kw).fit(*clf_data), clf_data[0])
    assert ours.values.shape == (4, N_FEATURES)  # the margin, not two probability columns
    assert_same_output(ours, theirs)
    model = xgb.XGBClassifier(**kw).fit(*multi_data)
    ours, theirs = explain_both(model, multi_data[0])
    assert ours.values.shape == theirs.values.shape == (4, N_FEATURES, 3)
    assert_same_output(ours[..., 0], theirs[..., 0])
    # classes 1 and 2: shap 0.50 with xgboost 3 adds base_score[0] where base_score[k] belongs
    # (its values no longer sum to the margin); esensc's base value is the mean margin
    X = multi_data[0]
    np.testing.assert_allclose(
        ours.base_values[0], model.predict(X[:30], output_margin=True).mean(0), atol=1e-5
    )


def test_xgboost_regressor_and_native_booster(clf_data):
    xgb = pytest.importorskip("xgboost")
    X, y = clf_data
    reg = xgb.XGBRegressor(n_estimators=15, max_depth=3, n_jobs=1).fit(X, X[:, 0] * X[:, 1])
    assert_same_output(*explain_both(reg, X))
    params = {"objective": "binary:logistic", "max_depth": 3, "nthread": 1}
    booster = xgb.train(params, xgb.DMatrix(X, label=y), num_boost_round=15)
    assert_same_output(*explain_both(booster, X))


def test_lightgbm_classifier_regressor_and_booster(clf_data):
    lgb = pytest.importorskip("lightgbm")
    X, y = clf_data
    kw = dict(n_estimators=15, num_leaves=7, verbose=-1, n_jobs=1)
    ours, theirs = explain_both(lgb.LGBMClassifier(**kw).fit(X, y), X)
    assert_same_output(ours, theirs)
    assert_same_output(*explain_both(lgb.LGBMRegressor(**kw).fit(X, X[:, 0] * X[:, 1]), X))
    booster = lgb.train(
        {"objective": "binary", "num_leaves": 7, "verbose": -1, "num_threads": 1},
        lgb.Dataset(X, label=y), num_boost_round=15,
    )  # fmt: skip
    assert_same_output(*explain_both(booster, X))


def test_sklearn_trees_forest_probabilities_boosting_margins(clf_data):
    ens = pytest.importorskip("sklearn.ensemble")
    X, y = clf_data
    forest = ens.RandomForestClassifier(8, max_depth=3, random_state=0).fit(X, y)
    ours, theirs = explain_both(forest, X)
    assert ours.values.shape == (4, N_FEATURES, 2)  # shap's raw forest output: probabilities
    assert_same_output(ours, theirs)
    for model in (
        ens.GradientBoostingClassifier(n_estimators=10, random_state=0).fit(X, y),
        ens.HistGradientBoostingClassifier(max_iter=10).fit(X, y),
        ens.RandomForestRegressor(8, max_depth=3, random_state=0).fit(X, X[:, 0]),
    ):
        ours, theirs = explain_both(model, X)
        assert ours.values.shape == (4, N_FEATURES)
        assert_same_output(ours, theirs)


def test_linear_models_equal_linear_explainer_values(clf_data, multi_data):
    lm = pytest.importorskip("sklearn.linear_model")
    for X, y in (clf_data, multi_data):
        ours, theirs = explain_both(lm.LogisticRegression().fit(X, y), X)
        assert_same_output(ours, theirs)
        np.testing.assert_allclose(ours.values, theirs.values, atol=1e-10)  # additive: exact
    X = clf_data[0]
    ours, theirs = explain_both(lm.LinearRegression().fit(X, X @ np.arange(5.0)), X)
    np.testing.assert_allclose(ours.values, theirs.values, atol=1e-10)


def test_background_over_100_rows_is_subsampled_like_shap(rng):
    shap = pytest.importorskip("shap")
    lm = pytest.importorskip("sklearn.linear_model")
    X = rng.normal(size=(300, N_FEATURES))
    reg = lm.LinearRegression().fit(X, X @ np.arange(5.0) + rng.normal(size=300))
    ours = esensc.Explainer(reg, X)(X[:3])
    theirs = shap.Explainer(reg, X)(X[:3])
    np.testing.assert_allclose(ours.base_values, theirs.base_values, atol=1e-12)
    np.testing.assert_allclose(ours.values, theirs.values, atol=1e-10)


def test_other_choices_by_argument(clf_data):
    xgb = pytest.importorskip("xgboost")
    X, y = clf_data
    model = xgb.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1).fit(X, y)
    bg = X[:20]
    proba = esensc.Explainer(model, bg, model_output="probability")
    assert proba.model_output == "probability"
    assert proba(X[:2]).values.shape == (2, N_FEATURES, 2)
    pred = esensc.Explainer(model, bg, model_output="predict")(X[:2])
    np.testing.assert_allclose(pred.values.sum(1) + pred.base_values, model.predict(X[:2]))
    with pytest.raises(ValueError, match="model_output must be one of"):
        esensc.Explainer(model, bg, model_output="logits")
    with pytest.raises(ValueError, match="applies to estimators"):
        esensc.Explainer(lambda Z: Z.sum(1), bg, model_output="margin")


@pytest.mark.slow  # shap's ExactExplainer compiles with numba on first use
@pytest.mark.parametrize("kind", ["callable", "mlp_classifier", "pipeline", "torch"])
def test_models_shap_rejects_match_shap_on_the_callable_users_pass(kind, clf_data):
    X, y = clf_data
    if kind == "callable":
        model = lambda Z: np.tanh(Z[:, 0] * Z[:, 1]) + Z[:, 2]  # noqa: E731
        shap_model = model
    elif kind == "mlp_classifier":
        nn = pytest.importorskip("sklearn.neural_network")
        model = nn.MLPClassifier((8,), max_iter=300, random_state=0).fit(X, y)
        shap_model = model.predict_proba
    elif kind == "pipeline":
        pytest.importorskip("sklearn")
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        model = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)
        shap_model = model.predict_proba
    else:
        torch = pytest.importorskip("torch")
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(N_FEATURES, 4), torch.nn.Tanh(),
                                    torch.nn.Linear(4, 2)).double()  # fmt: skip

        def shap_model(Z):
            with torch.no_grad():
                return model(torch.as_tensor(Z)).numpy()

    assert_same_output(*explain_both(model, X, shap_model=shap_model))


def test_beeswarm_takes_a_classifier_explanation_unsliced(clf_data):
    pytest.importorskip("shap")
    xgb = pytest.importorskip("xgboost")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    X, y = clf_data
    model = xgb.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1).fit(X, y)
    esensc.plots.beeswarm(esensc.Explainer(model, X[:20])(X[:10]), show=False)
    plt.close("all")
