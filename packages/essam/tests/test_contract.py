"""The monorepo's optimizer contract (methodkit.testing.OptimizerContract), ZO variant."""

import torch

from essam import ESSAM, ESSAMStepInfo
from methodkit.testing import OptimizerContract


class TestESSAMContract(OptimizerContract):
    requires_closure = True
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

    def test_params_without_grad_are_skipped(self):
        # ZO optimizers never look at .grad; a requires_grad=False tensor stays unchanged
        x, loss = self._quadratic_problem()
        frozen = torch.nn.Parameter(torch.randn(5), requires_grad=False)
        before = frozen.detach().clone()
        opt = self.make_optimizer([x, frozen])
        self._run(opt, lambda: loss(x), 5)
        assert torch.equal(frozen.detach(), before)
        assert not torch.equal(x.detach(), torch.ones_like(x))

    def test_non_contiguous_params(self):
        # rewards are shaped by z-scores, so float32 summation order matters: evaluate the loss
        # on a contiguous copy; both layouts must receive the same noise and updates
        gen = torch.Generator().manual_seed(1)
        base = torch.randn(3, 4, generator=gen)
        target = torch.randn(4, 3, generator=gen)
        p_nc = torch.nn.Parameter(base.clone().t())
        p_c = torch.nn.Parameter(base.clone().t().contiguous())
        opt_nc = self.make_optimizer([p_nc])
        opt_c = self.make_optimizer([p_c])
        self._run(opt_nc, lambda: ((p_nc.contiguous() - target) ** 2).sum(), 5)
        self._run(opt_c, lambda: ((p_c - target) ** 2).sum(), 5)
        torch.testing.assert_close(p_nc.detach(), p_c.detach(), rtol=1e-5, atol=1e-6)
