"""The optimizer contract passes for torch's own optimizers and bites broken ones."""

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from methodkit.testing import OptimizerContract, ZerothOrderOptimizerContract  # noqa: E402


class TestSGDMomentumContract(OptimizerContract):
    def make_optimizer(self, params):
        return torch.optim.SGD(params, lr=0.05, momentum=0.9)


class TestAdamContract(OptimizerContract):
    def make_optimizer(self, params):
        return torch.optim.Adam(params, lr=0.02)


class _ForgetfulSGD(torch.optim.SGD):
    """Broken: its state_dict drops the momentum buffers."""

    def state_dict(self):
        sd = super().state_dict()
        sd["state"] = {}
        return sd


class _GroupBlindSGD(torch.optim.SGD):
    """Broken: every group steps with the default lr."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-self.defaults["lr"])
        return loss


class _DecayEverythingSGD(torch.optim.SGD):
    """Broken: shrinks parameters that have no gradient."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = super().step(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    p.mul_(0.99)
        return loss


class _NoClosureSGD(torch.optim.SGD):
    """Broken: ignores the closure and returns nothing."""

    @torch.no_grad()
    def step(self, closure=None):
        return super().step(None)


class _Broken(OptimizerContract):
    cls = torch.optim.SGD

    def make_optimizer(self, params):
        return self.cls(params, lr=0.05, momentum=0.9)


@pytest.mark.parametrize(
    ("cls", "test", "match"),
    [
        (_ForgetfulSGD, "test_state_dict_round_trip", "uninterrupted trajectory"),
        (_GroupBlindSGD, "test_two_param_groups_with_different_lr", "lr=0 moved"),
        (_DecayEverythingSGD, "test_params_without_grad_are_skipped", "without .grad"),
        (_NoClosureSGD, "test_step_with_closure", "closure's loss"),
    ],
)
def test_contract_bites_broken_optimizers(cls, test, match):
    contract = type("C", (_Broken,), {"cls": cls})()
    with pytest.raises(AssertionError, match=match):
        getattr(contract, test)()


def test_contract_passes_for_the_unbroken_parent():
    contract = _Broken()
    for name in dir(contract):
        if name.startswith("test_"):
            getattr(contract, name)()


def test_requires_closure_mode_only_calls_step_with_closure():
    calls = []

    class ClosureOnlySGD(torch.optim.SGD):
        @torch.no_grad()
        def step(self, closure=None):
            calls.append(closure is not None)
            if closure is None:
                raise RuntimeError("closure required")
            return super().step(closure)

    class Contract(OptimizerContract):
        requires_closure = True

        def make_optimizer(self, params):
            return ClosureOnlySGD(params, lr=0.05, momentum=0.9)

    contract = Contract()
    contract.test_step_without_closure()  # skipped in closure-only mode
    contract.test_loss_decreases_on_quadratic()
    assert calls
    assert all(calls)


def test_make_optimizer_must_be_overridden():
    with pytest.raises(NotImplementedError, match="make_optimizer"):
        OptimizerContract().make_optimizer([])


def test_methodkit_testing_stays_torch_free():
    code = "import sys, methodkit.testing; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


class _SPSA(torch.optim.Optimizer):
    """A minimal MeZO/SPSA optimizer on methodkit.zo: forward-only, closure required."""

    def __init__(self, params, lr=2e-2, eps=1e-3, seed=0, touch_frozen=False):
        super().__init__(params, {"lr": lr, "eps": eps})
        self.seed, self.t, self.touch_frozen = seed, 0, touch_frozen

    def state_dict(self):
        sd = super().state_dict()
        sd["t"] = self.t
        return sd

    def load_state_dict(self, state_dict):
        self.t = state_dict["t"]
        super().load_state_dict({k: v for k, v in state_dict.items() if k != "t"})

    @torch.no_grad()
    def step(self, closure):
        from methodkit import zo

        losses = []
        for g, group in enumerate(self.param_groups):
            if group["lr"] == 0:  # a frozen group is never perturbed (restoring is inexact)
                continue
            params = [p for p in group["params"] if p.requires_grad or self.touch_frozen]
            seed = zo.derive_seed(self.seed, self.t, g)  # own noise per group
            proj, f_plus, f_minus = zo.two_point(closure, params, seed, group["eps"])
            zo.apply_combination_(params, [seed], [-group["lr"] * proj])
            losses.append((f_plus + f_minus) / 2)  # f(theta) + O(eps^2)
        self.t += 1
        return losses[0]


class TestSPSAZerothOrderContract(ZerothOrderOptimizerContract):
    n_steps = 600

    def make_optimizer(self, params):
        return _SPSA(params)


def test_zeroth_order_contract_bites_an_optimizer_that_moves_frozen_params():
    class _Bad(ZerothOrderOptimizerContract):
        def make_optimizer(self, params):
            return _SPSA(params, touch_frozen=True)

    with pytest.raises(AssertionError, match="requires_grad=False parameter changed"):
        _Bad().test_params_without_grad_are_skipped()
