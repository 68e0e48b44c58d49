"""WeatherDecomposer keeps the monorepo's estimator contract."""

import numpy as np

from eo_wm import WeatherDecomposer
from methodkit.testing import EstimatorContract


class TestWeatherDecomposerContract(EstimatorContract):
    # fit(W, doy) / transform(W, doy) take the day of year beside the forcing and transform
    # returns a dict of pathways, so scikit-learn's generic 2-D array checks do not apply.
    sklearn_check = False

    def make_estimator(self):
        return WeatherDecomposer(n_harmonics=2)

    def make_data(self):
        rng = np.random.default_rng(0)
        doy = np.tile(1 + np.arange(73) * 5.0, 3)
        temp = 11 + 10 * np.sin(2 * np.pi * (doy - 105) / 365) + rng.normal(0, 1.5, doy.size)
        precip = 12 * rng.gamma(0.8, 1 / 0.8, doy.size)
        return np.stack([temp, precip], 1), doy

    def output(self, estimator, X):
        _, doy = self.make_data()
        parts = estimator.transform(X, doy)
        return np.concatenate([parts["anomaly"], parts["stress"]], axis=-1)
