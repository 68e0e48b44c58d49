"""Reusable contract tests for ``torch.optim.Optimizer`` subclasses (CONTRIBUTING.md §5).

A package subclasses :class:`OptimizerContract` in its test suite and supplies a factory::

    from methodkit.testing import OptimizerContract

    class TestMyOptimizerContract(OptimizerContract):
        def make_optimizer(self, params):
            return MyOptimizer(params, lr=1e-2)

pytest then runs every ``test_*`` method below against that optimizer. ``params`` is either
a list of tensors or a list of parameter-group dicts (which may set ``lr``); the factory
passes it on to the optimizer it builds. Class attributes tune the checks for optimizers
that need it, e.g. a zeroth-order optimizer sets ``requires_closure = True`` (its closure is
then called with gradients disabled, and the tests call ``step(closure)`` only), or overrides
a single test method. The test methods take no fixtures, so a test can also call them directly.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch

Params = Sequence[torch.Tensor] | Sequence[dict[str, Any]]


class OptimizerContract:
    """The behaviour every optimizer in the monorepo must have; subclass it in a test file.

    Attributes:
        requires_closure: The optimizer only works with ``step(closure)``.
        n_steps: Steps of the convergence checks (quadratic and MLP).
        decrease_factor: Final loss must be below ``decrease_factor`` x the initial loss.
        lr_key: Name of the learning-rate entry of a parameter group.
    """

    requires_closure: bool = False
    n_steps: int = 100
    decrease_factor: float = 0.5
    lr_key: str = "lr"

    def make_optimizer(self, params: Params) -> torch.optim.Optimizer:
        """Build the optimizer under test over ``params`` (tensors or group dicts)."""
        raise NotImplementedError("subclasses of OptimizerContract implement make_optimizer")

    # ----------------------------------------------------------------- helpers
    @staticmethod
    def _quadratic_problem(
        dtype: torch.dtype = torch.float32,
    ) -> tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
        scales = torch.linspace(1.0, 3.0, 10, dtype=dtype)
        x = torch.nn.Parameter(torch.ones(10, dtype=dtype))

        def loss(p: torch.Tensor) -> torch.Tensor:
            return 0.5 * (scales * p * p).sum()

        return x, loss

    def _closure(
        self, opt: torch.optim.Optimizer, loss_fn: Callable[[], torch.Tensor]
    ) -> Callable[[], torch.Tensor]:
        def closure() -> torch.Tensor:
            opt.zero_grad()
            loss = loss_fn()
            if torch.is_grad_enabled() and loss.requires_grad:
                loss.backward()
            return loss

        return closure

    def _step(self, opt: torch.optim.Optimizer, loss_fn: Callable[[], torch.Tensor]) -> None:
        closure = self._closure(opt, loss_fn)
        if self.requires_closure:
            # torch's stubs type the closure as returning float; a Tensor loss is what users pass
            opt.step(closure)  # type: ignore[arg-type]
        else:
            closure()
            opt.step()

    def _run(
        self, opt: torch.optim.Optimizer, loss_fn: Callable[[], torch.Tensor], steps: int
    ) -> None:
        for _ in range(steps):
            self._step(opt, loss_fn)

    # ------------------------------------------------------------------ checks
    def test_step_without_closure(self) -> None:
        if self.requires_closure:
            return
        x, loss = self._quadratic_problem()
        opt = self.make_optimizer([x])
        before = x.detach().clone()
        loss(x).backward()
        opt.step()
        assert not torch.equal(x.detach(), before), "step() without closure did not move x"
        assert torch.isfinite(x).all()

    def test_step_with_closure(self) -> None:
        x, loss = self._quadratic_problem()
        opt = self.make_optimizer([x])
        before = x.detach().clone()
        expected = float(loss(x.detach()))
        out = opt.step(self._closure(opt, lambda: loss(x)))  # type: ignore[arg-type]
        assert out is not None, "step(closure) must return the closure's loss"
        value = float(out.detach()) if isinstance(out, torch.Tensor) else float(out)
        assert abs(value - expected) <= 1e-5 * max(1.0, abs(expected)), (
            "step(closure) returned a loss that is not the closure's value at the current point"
        )
        assert not torch.equal(x.detach(), before), "step(closure) did not move x"

    def test_params_without_grad_are_skipped(self) -> None:
        x, loss = self._quadratic_problem()
        frozen = torch.nn.Parameter(torch.randn(5, generator=torch.Generator().manual_seed(0)))
        before = frozen.detach().clone()
        opt = self.make_optimizer([x, frozen])
        self._run(opt, lambda: loss(x), 5)
        assert frozen.grad is None
        assert torch.equal(frozen.detach(), before), "a parameter without .grad was changed"
        assert not torch.equal(x.detach(), torch.ones_like(x)), "the other parameter did not move"

    def test_two_param_groups_with_different_lr(self) -> None:
        a, loss = self._quadratic_problem()
        b = torch.nn.Parameter(a.detach().clone())
        c = torch.nn.Parameter(a.detach().clone())
        probe = self.make_optimizer([torch.nn.Parameter(torch.ones(1))])
        lr = float(probe.param_groups[0][self.lr_key])
        opt = self.make_optimizer(
            [
                {"params": [a], self.lr_key: lr},
                {"params": [b], self.lr_key: lr / 10},
                {"params": [c], self.lr_key: 0.0},
            ]
        )
        assert len(opt.param_groups) == 3
        assert [g[self.lr_key] for g in opt.param_groups] == [lr, lr / 10, 0.0]
        self._step(opt, lambda: loss(a) + loss(b) + loss(c))
        step_a = (a.detach() - 1).abs().max()
        step_b = (b.detach() - 1).abs().max()
        assert torch.equal(c.detach(), torch.ones_like(c)), "a group with lr=0 moved"
        assert step_a > step_b > 0, "the group with the larger lr did not take the larger step"

    def test_state_dict_round_trip(self) -> None:
        gen = torch.Generator().manual_seed(0)
        x0 = torch.randn(4, 3, generator=gen)
        target = torch.randn(4, 3, generator=gen)

        def make() -> tuple[torch.nn.Parameter, torch.optim.Optimizer]:
            p = torch.nn.Parameter(x0.clone())
            return p, self.make_optimizer([p])

        def loss(p: torch.Tensor) -> torch.Tensor:
            return ((p - target) ** 2).sum() + (p**4).sum() * 0.01

        ref_p, ref_opt = make()
        self._run(ref_opt, lambda: loss(ref_p), 5)
        saved_state = copy.deepcopy(ref_opt.state_dict())
        saved_x = ref_p.detach().clone()
        self._run(ref_opt, lambda: loss(ref_p), 5)

        new_p, new_opt = make()
        with torch.no_grad():
            new_p.copy_(saved_x)
        new_opt.load_state_dict(saved_state)
        self._run(new_opt, lambda: loss(new_p), 5)
        assert torch.equal(new_p.detach(), ref_p.detach()), (
            "state_dict -> load_state_dict did not reproduce the uninterrupted trajectory"
        )

    def test_non_contiguous_params(self) -> None:
        gen = torch.Generator().manual_seed(1)
        base = torch.randn(3, 4, generator=gen)
        target = torch.randn(4, 3, generator=gen)
        p_nc = torch.nn.Parameter(base.clone().t())
        p_c = torch.nn.Parameter(base.clone().t().contiguous())
        assert not p_nc.is_contiguous()
        opt_nc = self.make_optimizer([p_nc])
        opt_c = self.make_optimizer([p_c])
        self._run(opt_nc, lambda: ((p_nc - target) ** 2).sum(), 5)
        self._run(opt_c, lambda: ((p_c - target) ** 2).sum(), 5)
        torch.testing.assert_close(p_nc.detach(), p_c.detach(), rtol=1e-5, atol=1e-6)

    def test_loss_decreases_on_quadratic(self) -> None:
        x, loss = self._quadratic_problem()
        opt = self.make_optimizer([x])
        start = float(loss(x.detach()))
        self._run(opt, lambda: loss(x), self.n_steps)
        end = float(loss(x.detach()))
        assert end < self.decrease_factor * start, f"quadratic loss {start:.4g} -> {end:.4g}"

    def test_loss_decreases_on_mlp(self) -> None:
        gen = torch.Generator().manual_seed(2)
        X = torch.randn(64, 8, generator=gen)
        teacher = torch.randn(8, 1, generator=gen)
        y = torch.tanh(X @ teacher)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(3)
            model = torch.nn.Sequential(
                torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)
            )
        opt = self.make_optimizer(list(model.parameters()))

        def loss() -> torch.Tensor:
            return ((model(X) - y) ** 2).mean()

        with torch.no_grad():
            start = float(loss())
        self._run(opt, loss, self.n_steps)
        with torch.no_grad():
            end = float(loss())
        assert end < self.decrease_factor * start, f"MLP loss {start:.4g} -> {end:.4g}"

    def test_float64(self) -> None:
        x, loss = self._quadratic_problem(torch.float64)
        opt = self.make_optimizer([x])
        start = float(loss(x.detach()))
        self._run(opt, lambda: loss(x), self.n_steps)
        assert x.dtype == torch.float64
        assert torch.isfinite(x).all()
        assert float(loss(x.detach())) < self.decrease_factor * start
        for state in opt.state.values():
            for value in state.values():
                if isinstance(value, torch.Tensor) and value.shape == x.shape:
                    assert value.dtype == torch.float64, "float64 parameter, non-float64 state"

    def test_repr(self) -> None:
        x, _ = self._quadratic_problem()
        opt = self.make_optimizer([x])
        text = repr(opt)
        assert isinstance(text, str)
        assert type(opt).__name__ in text


class ZerothOrderOptimizerContract(OptimizerContract):
    """The contract for closure-only, forward-only optimizers (MeZO-like, ES-like).

    Two checks change meaning without gradients. Such optimizers never read ``.grad``, so
    what they must skip is a parameter with ``requires_grad=False``. And a step divides loss
    differences by a small ``2 eps``, amplifying the float32 rounding of a loss summed in a
    different memory order ~1e3x, so the non-contiguous check evaluates the loss on a
    contiguous copy: both layouts must then receive identical noise and updates.
    """

    requires_closure = True

    def test_params_without_grad_are_skipped(self) -> None:
        x, loss = self._quadratic_problem()
        gen = torch.Generator().manual_seed(0)
        frozen = torch.nn.Parameter(torch.randn(5, generator=gen), requires_grad=False)
        before = frozen.detach().clone()
        opt = self.make_optimizer([x, frozen])
        self._run(opt, lambda: loss(x), 5)
        assert torch.equal(frozen.detach(), before), "a requires_grad=False parameter changed"
        assert not torch.equal(x.detach(), torch.ones_like(x)), "the other parameter did not move"

    def test_non_contiguous_params(self) -> None:
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
