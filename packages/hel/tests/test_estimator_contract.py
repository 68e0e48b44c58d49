"""EchoRNNClassifier and EchoRNNRegressor keep the monorepo's estimator contract.

scikit-learn's own ``check_estimator`` runs in test_api (slow); here the rest of the contract:
clone and params, pickling, refitting to the same numbers, "not fitted" errors.
"""

import numpy as np

from hel.sklearn import EchoRNNClassifier, EchoRNNRegressor
from methodkit.testing import EstimatorContract


def _series(n=12, t=16, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 1, t))
    return X, (X[:, 0, :4].mean(1) > 0).astype(int)


class TestEchoRNNClassifierContract(EstimatorContract):
    sklearn_check = False  # run in test_api.test_sklearn_check_estimator (slow)

    def make_estimator(self):
        return EchoRNNClassifier(hidden_size=4, epochs=2, random_state=0)

    def make_data(self):
        return _series()


class TestEchoRNNRegressorContract(EstimatorContract):
    sklearn_check = False  # run in test_api.test_sklearn_check_estimator (slow)

    def make_estimator(self):
        return EchoRNNRegressor(hidden_size=4, epochs=2, random_state=0)

    def make_data(self):
        X, y = _series()
        return X, y.astype(float)
