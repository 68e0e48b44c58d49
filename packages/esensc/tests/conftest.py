"""esensc test set-up: a seeded generator fixture."""

import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
