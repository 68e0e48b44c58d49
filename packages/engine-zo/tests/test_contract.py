"""The monorepo's optimizer contract (methodkit.testing.OptimizerContract), ZO variant."""

import pytest

from engine_zo import LOZO, Engine, MeZO, SubZero
from methodkit.testing import ZerothOrderOptimizerContract


class _ZOContract(ZerothOrderOptimizerContract):
    n_steps = 600


@pytest.mark.filterwarnings("ignore:rank 2 is >= min:UserWarning")
class TestEngineContract(_ZOContract):
    def make_optimizer(self, params):
        return Engine(params, lr=2e-2, eps=1e-3, ranks=(2,), seed=0)


class TestMeZOContract(_ZOContract):
    def make_optimizer(self, params):
        return MeZO(params, lr=2e-2, eps=1e-3, seed=0)


class TestLOZOContract(_ZOContract):
    def make_optimizer(self, params):
        return LOZO(params, lr=2e-2, eps=1e-3, rank=2, lazy_interval=10, seed=0)


class TestSubZeroContract(_ZOContract):
    def make_optimizer(self, params):
        return SubZero(params, lr=2e-2, eps=1e-3, rank=2, refresh_interval=10, seed=0)
