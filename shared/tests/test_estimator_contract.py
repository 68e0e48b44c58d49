"""EstimatorContract passes a well-behaved estimator and catches each broken one."""

import numpy as np
import pytest

from methodkit.testing import EstimatorContract

sklearn = pytest.importorskip("sklearn")
from sklearn.base import BaseEstimator, ClassifierMixin  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.utils.validation import check_is_fitted  # noqa: E402


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    return X, (X[:, 0] > 0).astype(int)


class TestLogisticRegressionKeepsTheContract(EstimatorContract):
    def make_estimator(self):
        return LogisticRegression()

    def make_data(self):
        return _data()


class _Noisy(ClassifierMixin, BaseEstimator):
    """Unseeded: refitting gives other numbers."""

    def __init__(self, scale=1.0):
        self.scale = scale

    def fit(self, X, y):
        self.w_ = np.random.default_rng().normal(size=X.shape[1]) * self.scale
        self.classes_ = np.unique(y)
        return self

    def predict(self, X):
        check_is_fitted(self)
        return X @ self.w_


class _NoSelf(_Noisy):
    def fit(self, X, y):
        super().fit(X, y)


class _Chatty(_Noisy):
    def predict(self, X):
        return np.zeros(len(X))  # no NotFittedError when unfitted


class _Renamer(_Noisy):
    def __init__(self, scale=1.0):
        self.scale_value = scale  # get_params cannot find `scale`


def _contract(cls):
    class Case(EstimatorContract):
        sklearn_check = False

        def make_estimator(self):
            return cls()

        def make_data(self):
            return _data()

    return Case()


@pytest.mark.parametrize(
    ("cls", "check", "error"),
    [
        (_Noisy, "test_fit_twice_gives_the_same_numbers", AssertionError),
        (_NoSelf, "test_pickle_round_trip", AssertionError),
        (_Chatty, "test_unfitted_estimator_says_so", AssertionError),
        (_Renamer, "test_get_params_round_trip_and_clone", AttributeError),
    ],
)
def test_the_contract_catches_a_broken_estimator(cls, check, error):
    with pytest.raises(error):
        getattr(_contract(cls), check)()
