"""The contract every scikit-learn-style estimator in the monorepo keeps (issue 50).

Subclass :class:`EstimatorContract` in a test file, say how to build the estimator and its
data, and pytest collects the checks: scikit-learn's own ``check_estimator`` where the
estimator follows its API, plus what a user relies on beyond it (clone, ``get_params`` /
``set_params``, pickling, fitting twice to the same numbers, a clear "not fitted" error).
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np


class EstimatorContract:
    """The behaviour every estimator must have; subclass it in a test file.

    Attributes:
        sklearn_check: Run scikit-learn's ``check_estimator`` (set False, with the reason in a
            comment, for an estimator whose inputs are not 2-D arrays).
        expected_failed_checks: ``{check name: reason}`` passed to ``check_estimator``.
    """

    sklearn_check: bool = True
    expected_failed_checks: dict[str, str] = {}  # noqa: RUF012 - read-only class default

    def make_estimator(self) -> Any:
        """A fresh, seeded, unfitted estimator (small enough to fit in about a second)."""
        raise NotImplementedError("subclasses of EstimatorContract implement make_estimator")

    def make_data(self) -> tuple[Any, Any]:
        """``(X, y)`` to fit on (``y`` may be None for an unsupervised estimator)."""
        raise NotImplementedError("subclasses of EstimatorContract implement make_data")

    def output(self, estimator: Any, X: Any) -> np.ndarray:
        """What the fitted estimator gives a user: probabilities, predictions or a transform."""
        for name in ("predict_proba", "predict", "transform"):
            if hasattr(estimator, name):
                return np.asarray(getattr(estimator, name)(X))
        raise NotImplementedError("override output(): the estimator has no predict/transform")

    # ----------------------------------------------------------------- helpers
    def _fitted(self) -> tuple[Any, Any]:
        X, y = self.make_data()
        est = self.make_estimator()
        fitted = est.fit(X) if y is None else est.fit(X, y)
        assert fitted is est, "fit must return self"
        return est, X

    # ------------------------------------------------------------------- checks
    def test_sklearn_check_estimator(self) -> None:
        """scikit-learn's own API checks (clone, params, input validation, ...)."""
        if not self.sklearn_check:
            import pytest  # a test helper: only ever called inside a pytest run

            pytest.skip("sklearn_check = False: the inputs are not scikit-learn's 2-D arrays")
        from sklearn.utils.estimator_checks import check_estimator

        check_estimator(
            self.make_estimator(), expected_failed_checks=dict(self.expected_failed_checks)
        )

    def test_get_params_round_trip_and_clone(self) -> None:
        """``set_params(**get_params())`` and ``clone`` keep every hyper-parameter."""
        from sklearn.base import clone

        est = self.make_estimator()
        params = est.get_params(deep=False)
        assert est.set_params(**params) is est
        assert est.get_params(deep=False).keys() == params.keys()
        copy = clone(est)
        assert copy is not est
        for key, value in params.items():
            assert repr(copy.get_params(deep=False)[key]) == repr(value), key

    def test_unfitted_estimator_says_so(self) -> None:
        """Using an unfitted estimator raises scikit-learn's ``NotFittedError``."""
        from sklearn.exceptions import NotFittedError

        X, _ = self.make_data()
        try:
            self.output(self.make_estimator(), X)
        except NotFittedError:
            return
        raise AssertionError("an unfitted estimator must raise NotFittedError")

    def test_fit_twice_gives_the_same_numbers(self) -> None:
        """Same seed and data: refitting, and fitting a clone, give identical outputs."""
        from sklearn.base import clone

        est, X = self._fitted()
        first = self.output(est, X)
        _, y = self.make_data()
        est.fit(X) if y is None else est.fit(X, y)
        np.testing.assert_array_equal(self.output(est, X), first)
        twin = clone(est)
        twin.fit(X) if y is None else twin.fit(X, y)
        np.testing.assert_array_equal(self.output(twin, X), first)

    def test_pickle_round_trip(self) -> None:
        """A pickled fitted estimator gives the same outputs after loading."""
        est, X = self._fitted()
        loaded = pickle.loads(pickle.dumps(est))
        np.testing.assert_array_equal(self.output(loaded, X), self.output(est, X))
