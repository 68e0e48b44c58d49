"""The monorepo's optimizer contract (methodkit.testing.OptimizerContract), ZO variant."""

import pytest
import torch

testing = pytest.importorskip("methodkit.testing")
OptimizerContract = getattr(testing, "OptimizerContract", None)
if OptimizerContract is None:  # pragma: no cover - older methodkit
    pytest.skip("methodkit.testing.OptimizerContract not available", allow_module_level=True)

from engine_zo import LOZO, Engine, MeZO, SubZero  # noqa: E402


class _ZOContract(OptimizerContract):
    requires_closure = True
    n_steps = 600

    def test_params_without_grad_are_skipped(self):
        # Zeroth-order optimizers never look at .grad: a parameter the loss ignores is
        # perturbed like any other (as in MeZO). What they must skip is a parameter with
        # requires_grad=False, which stays bitwise unchanged.
        x, loss = self._quadratic_problem()
        frozen = torch.nn.Parameter(torch.randn(5), requires_grad=False)
        before = frozen.detach().clone()
        opt = self.make_optimizer([x, frozen])
        self._run(opt, lambda: loss(x), 5)
        assert torch.equal(frozen.detach(), before)
        assert not torch.equal(x.detach(), torch.ones_like(x))

    def test_non_contiguous_params(self):
        # A ZO step divides loss differences by 2 eps, so the float32 rounding of a loss summed
        # in a different memory order (~1e-7) is amplified ~1e3x. With the loss evaluated on a
        # contiguous copy, both layouts must receive the same noise and updates.
        gen = torch.Generator().manual_seed(1)
        base = torch.randn(3, 4, generator=gen)
        target = torch.randn(4, 3, generator=gen)
        p_nc = torch.nn.Parameter(base.clone().t())
        p_c = torch.nn.Parameter(base.clone().t().contiguous())
        assert not p_nc.is_contiguous()
        opt_nc = self.make_optimizer([p_nc])
        opt_c = self.make_optimizer([p_c])
        self._run(opt_nc, lambda: ((p_nc.contiguous() - target) ** 2).sum(), 5)
        self._run(opt_c, lambda: ((p_c - target) ** 2).sum(), 5)
        torch.testing.assert_close(p_nc.detach(), p_c.detach(), rtol=1e-5, atol=1e-6)


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
