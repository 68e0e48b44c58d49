"""Interoperability with shap (optional extra) and the numpy-only fallback."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import esensc
from esensc.explanation import NumpyExplanation


def model3(Z):
    return np.tanh(Z[:, 0] * Z[:, 1] - Z[:, 2]) + 0.5 * Z[:, 0] * Z[:, 1] * Z[:, 2]


def test_result_is_a_shap_explanation_and_plots_accept_it(rng):
    shap = pytest.importorskip("shap")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bg, X = rng.normal(size=(10, 4)), rng.normal(size=(8, 4))
    f = lambda Z: model3(Z[:, :3]) + Z[:, 3]  # noqa: E731
    e = esensc.Explainer(f, bg, feature_names=list("abcd"))(X)
    assert isinstance(e, shap.Explanation)
    assert e[0].values.shape == (4,)
    assert e[:, 1].values.shape == (8,)
    assert e.abs.mean(0).values.shape == (4,)
    for plot in (shap.plots.bar, shap.plots.beeswarm):
        plot(e, show=False)
        plt.close("all")
    shap.plots.waterfall(e[0], show=False)
    plt.close("all")
    shap.plots.scatter(e[:, "a"], show=False)
    plt.close("all")
    e.plot("beeswarm", show=False)
    plt.close("all")
    assert esensc.plots.waterfall is shap.plots.waterfall  # thin: shap's own plots
    with pytest.raises(AttributeError, match="no plot called 'pie'"):
        _ = esensc.plots.pie
    with pytest.raises(ValueError, match="no plot called 'pie'"):
        e.plot("pie")
    plain = e.to_shap()
    assert type(plain) is shap.Explanation
    np.testing.assert_array_equal(plain.values, e.values)


@pytest.mark.slow  # shap's ExactExplainer JIT-compiles on first use (~8 s)
def test_matches_shap_exact_explainer_for_three_features(rng):
    shap = pytest.importorskip("shap")
    bg, X = rng.normal(size=(12, 3)), rng.normal(size=(5, 3))
    ref = shap.ExactExplainer(model3, shap.maskers.Independent(bg, max_samples=12))(X)
    ours = esensc.Explainer(model3, shap.maskers.Independent(bg, max_samples=12))(X)
    np.testing.assert_allclose(ours.values, ref.values, atol=1e-10)
    np.testing.assert_allclose(ours.base_values, ref.base_values, atol=1e-12)


@pytest.mark.slow
def test_logit_game_matches_shap_exact_with_linearize_link_false(rng):
    shap = pytest.importorskip("shap")
    bg, X = rng.normal(size=(12, 3)), rng.normal(size=(4, 3))
    p = lambda Z: 1 / (1 + np.exp(-model3(Z)))  # noqa: E731
    ref = shap.ExactExplainer(
        p, shap.maskers.Independent(bg), link=shap.links.logit, linearize_link=False
    )(X)
    np.testing.assert_allclose(
        esensc.Explainer(p, bg, link="logit").attribute(X), ref.values, atol=1e-10
    )


def test_interventional_treeshap_is_the_same_game(rng):
    pytest.importorskip("shap")
    xgb = pytest.importorskip("xgboost")
    import shap

    Xtr = rng.normal(size=(200, 5))
    y = Xtr[:, 0] * Xtr[:, 1] + np.sin(Xtr[:, 2]) + Xtr[:, 3] * Xtr[:, 4] * Xtr[:, 0]
    model = xgb.XGBRegressor(n_estimators=20, max_depth=3, n_jobs=1).fit(Xtr, y)
    bg, X = Xtr[:20], Xtr[150:154]
    tree = shap.TreeExplainer(model, data=bg, feature_perturbation="interventional")
    margin = lambda Z: model.predict(Z, output_margin=True)  # noqa: E731
    np.testing.assert_allclose(tree.shap_values(X), esensc.exact_shapley(margin, bg, X), atol=1e-4)
    # ESENSC on the xgboost estimator itself (unwrapped to predict): efficiency
    e = esensc.Explainer(model, bg)(X)
    np.testing.assert_allclose(
        e.values.sum(1), model.predict(X).astype(float) - e.base_values, atol=1e-6
    )


def test_native_xgboost_booster_with_inplace_predict_margin(rng):
    """The README's line for a native ``xgboost.Booster`` (which rejects numpy arrays)."""
    xgb = pytest.importorskip("xgboost")
    X_train = rng.normal(size=(200, 5))
    y = (X_train[:, 0] * X_train[:, 1] + X_train[:, 2] > 0).astype(float)
    params = {"objective": "binary:logistic", "max_depth": 3, "nthread": 1}
    booster = xgb.train(params, xgb.DMatrix(X_train, label=y), num_boost_round=20)
    X = X_train[150:154]
    with pytest.raises(TypeError, match="DMatrix"):
        booster.predict(X, output_margin=True)
    ex = esensc.Explainer(
        lambda Z: booster.inplace_predict(Z, predict_type="margin"), X_train[:100]
    )
    e = ex(X)
    margin = booster.predict(xgb.DMatrix(X), output_margin=True).astype(float)
    np.testing.assert_allclose(e.values.sum(1), margin - e.base_values, atol=1e-5)
    background_margin = booster.predict(xgb.DMatrix(X_train[:100]), output_margin=True)
    np.testing.assert_allclose(e.base_values, background_margin.mean(), atol=1e-5)


def test_numpy_explanation_slicing(rng):
    vals = rng.normal(size=(4, 3, 2))
    e = NumpyExplanation(vals, np.zeros((4, 2)), rng.normal(size=(4, 3)), list("abc"), ["p", "q"])
    assert e.shape == (4, 3, 2)
    assert len(e) == 4
    assert e[0].values.shape == (3, 2)
    assert e[0].base_values.shape == (2,)
    assert e[:, 1].feature_names == "b"
    assert e[..., 1].values.shape == (4, 3)
    assert e[..., 1].output_names == "q"
    assert e[..., 1].base_values.shape == (4,)
    np.testing.assert_array_equal(e.abs.mean(0).values, np.abs(vals).mean(0))
    assert e[1:3, [0, 2]].feature_names == ["a", "c"]


def test_works_without_shap_installed():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["shap"] = None  # makes `import shap` raise ImportError
        import numpy as np
        import esensc
        e = esensc.Explainer(lambda Z: Z @ np.arange(3.0), np.zeros((2, 3)))(np.ones((2, 3)))
        assert type(e).__mro__[2].__name__ == "NumpyExplanation", type(e).__mro__
        assert e[0].values.tolist() == [0.0, 1.0, 2.0]
        try:
            e.to_shap()
        except ImportError as exc:
            assert "esensc[shap]" in str(exc)
        else:
            raise SystemExit("to_shap() did not raise")
        try:
            e.plot("bar")
        except ImportError as exc:
            assert "esensc[shap]" in str(exc)
        else:
            raise SystemExit("plot() did not raise")
        try:
            esensc.plots.beeswarm(e)
        except ImportError as exc:
            assert "esensc[shap]" in str(exc)
        else:
            raise SystemExit("esensc.plots did not raise")
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
