"""Near-flat games: the equal-split share and the warning that names a better link."""

import warnings

import numpy as np
import pytest

import esensc
from esensc.diagnostics import equal_split_share


def saturated_probability(Z):
    """A logistic model: background rows sit at p ~ 0, explained rows at p ~ 1."""
    return 1 / (1 + np.exp(-2 * Z.sum(1)))


def test_equal_split_share_is_zero_for_additive_and_one_for_pure_surplus():
    v0, vN = np.array([0.0]), np.array([3.0])
    additive = equal_split_share(v0, vN, np.array([[1.0, 2.0]]), np.array([[2.0, 1.0]]))
    np.testing.assert_allclose(additive, [0.0], atol=1e-15)
    flat = equal_split_share(v0, vN, np.zeros((1, 2)), np.full((1, 2), 3.0))
    np.testing.assert_allclose(flat, [1.0])
    np.testing.assert_allclose(equal_split_share(v0, v0, np.zeros((1, 2)), np.zeros((1, 2))), [0])


def test_saturated_probabilities_warn_and_name_the_logit_link(rng):
    # one feature alone cannot lift a background row, nor can dropping one sink an explained row
    bg = rng.normal(loc=-1.5, scale=0.3, size=(40, 6))  # 2 * sum ~ -18: p ~ 1e-8
    X = rng.normal(loc=1.5, scale=0.3, size=(10, 6))  # 2 * sum ~ 18: p ~ 1 - 1e-8
    ex = esensc.Explainer(saturated_probability, bg)
    with pytest.warns(RuntimeWarning, match=r"near-flat games.*link='logit'"):
        ex.attribute(X)
    assert ex.equal_split_share.shape == (10,)
    assert np.all(ex.equal_split_share > 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the log-odds scale restores the gains: no warning
        logit = esensc.Explainer(saturated_probability, bg, link="logit")
        logit.attribute(X)
    assert np.mean(logit.equal_split_share > 0.5) <= 0.5


def test_margin_and_probability_that_the_model_lacks(rng):
    lm = pytest.importorskip("sklearn.linear_model")
    nn = pytest.importorskip("sklearn.neural_network")
    X = rng.normal(size=(40, 3))
    y = (X[:, 0] > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlp = nn.MLPClassifier((4,), max_iter=20, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="has no margin"):
        esensc.Explainer(mlp, X[:10], model_output="margin")
    with pytest.raises(ValueError, match=r"has no predict_proba\(\)"):
        esensc.Explainer(lm.LinearRegression().fit(X, X[:, 0]), X[:10], model_output="probability")
