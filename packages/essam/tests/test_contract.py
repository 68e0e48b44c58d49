"""The monorepo's optimizer contract (methodkit.testing.OptimizerContract), ZO variant."""

import torch

from essam import ESSAM, ESSAMStepInfo
from methodkit.testing import ZerothOrderOptimizerContract


class TestESSAMContract(ZerothOrderOptimizerContract):
    n_steps = 150

    def make_optimizer(self, params):
        # the contract minimises a loss: maximize=False turns it into reward = -loss
        return ESSAM(
            params,
            sigma=1e-2,
            lr=2e-2,
            rho=0.02,
            population_size=8,
            maximize=False,
            variant="accelerated",
            sam_refresh=5,
            seed=0,
        )

    def test_step_with_closure(self):
        # ESSAM.step returns an ESSAMStepInfo (it never evaluates the closure at theta itself)
        x, loss = self._quadratic_problem()
        opt = self.make_optimizer([x])
        before = x.detach().clone()
        info = opt.step(self._closure(opt, lambda: loss(x)))
        assert isinstance(info, ESSAMStepInfo)
        assert len(info.update_rewards) == 8
        assert all(r < 0 for r in info.update_rewards)  # rewards = -loss
        assert not torch.equal(x.detach(), before)
