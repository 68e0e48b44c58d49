"""Hamiltonian Echo Learning (HEL) and Echo Learning (EL): the method's core.

Algorithm (one call of ``backward``; inferred from the abstract and prior Hamiltonian echo
work, checked against autograd BPTT in float64):

1. **Inference pass** (no graph): ``(phi_t, pi_t) = leapfrog(phi_{t-1}, pi_{t-1}; u_t)`` for
   ``t = 1..T``; the head reads out and yields the error signals ``g_t = dL/dphi_t``.
2. **Echo pass**: start at ``(phi_T, -pi_T + eps g_T)`` and, for ``t = T..1``, run the *same*
   leapfrog step with input ``u_t`` (this inverts step ``t``), record the local statistic at
   the half-step position ``phi_half^e``, then add ``eps g_{t-1}`` to the momentum.
3. **Read out** the gradient from the difference of echo and free statistics:

   * HEL: ``dL/dtheta = -h lim (S(+eps) - S(-eps)) / (2 eps)``,
     ``S = sum_t grad_theta V(phi_half^e; u_t)``;
   * EL: ``dL/dtheta = h sum_t (df/dtheta)^T (phi_half^e(+eps) - phi_half^e(-eps)) / (2 eps)``.

Nothing is stored per step: memory is independent of ``T``.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Any

import torch

from hel._estimator import GradientEstimator, accumulate, check_eps
from hel.cells import ForceCell, HamiltonianCell, leapfrog_step
from hel.homeostasis import homeostatic_loss_grad
from hel.models import EchoRNN

__all__ = ["MODES", "EchoLearning", "HamiltonianEcho"]

MODES = ("centered", "two_pass", "linearized")
_AUTO_TARGET = 3e-3  # accumulated nudge / state RMS for eps="auto" (float32 guidance)


@contextmanager
def _cast(module: torch.nn.Module, dtype: torch.dtype | None):  # noqa: ANN202
    """Temporarily run ``module`` in ``dtype`` (float32 -> float64 -> float32 is exact)."""
    if dtype is None:
        yield
        return
    old = next(module.parameters()).dtype
    module.to(dtype)
    try:
        yield
    finally:
        module.to(old)


class _EchoBase(GradientEstimator):
    """Shared machinery of the echo estimators (inference pass, eps, echo loop)."""

    _modes: tuple[str, ...] = MODES

    def __init__(
        self,
        model: EchoRNN,
        loss_fn: Any,
        eps: float | str = "auto",
        mode: str = "centered",
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(model, loss_fn)
        self.eps = check_eps(eps)
        if mode not in self._modes:
            raise ValueError(f"mode must be one of {self._modes}, got {mode!r}")
        if dtype not in (None, torch.float32, torch.float64):
            raise TypeError(f"dtype must be None, torch.float32 or torch.float64, got {dtype}")
        self.mode = mode
        self.dtype = dtype
        if model.cell.damping is not None:
            warnings.warn(
                f"{type(model.cell).__name__} has a momentum-dependent (damping) force: the "
                "leapfrog step is not time-reversible and the echo gradient is biased",
                stacklevel=3,
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(eps={self.eps!r}, mode={self.mode!r})"

    # -------------------------------------------------------------- statistics
    def _stat(self, phi_half: torch.Tensor, u: torch.Tensor, w: torch.Tensor) -> tuple:
        """Weighted local statistic of one echo step (HEL: ``sum_b w_b grad_theta V``)."""
        raise NotImplementedError

    def _fwd_hook(self, phi_half: torch.Tensor, u: torch.Tensor, T: int) -> None:
        """Per-step work during the inference pass (HEL two_pass, EL homeostasis)."""

    # -------------------------------------------------------------- the algorithm
    def backward(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        self._check(x, y)
        cell = self.model.cell
        with _cast(cell, self.dtype):
            dt = self.dtype or x.dtype
            xc = x.to(dt)
            grads, loss, eps_used = self._backward(xc, y, state)
        accumulate(self.cell_params, grads)
        self.last_stats = {
            "passes": 2 if self.mode != "centered" else 3,
            "stored_steps": 0,
            "eps": eps_used,
            "mode": self.mode,
        }
        return loss.to(x.dtype)

    def _signal(
        self, phi_t: torch.Tensor, t: int, T: int, c: torch.Tensor | None, y: torch.Tensor
    ) -> torch.Tensor | None:
        """Error signal ``g_t = dL/dphi_t`` (1-based ``t``) evaluated at position ``phi_t``."""
        readout = self.model.readout
        if readout == "mean":
            return c / T
        if readout == "last":
            return c if t == T else None
        B = y.shape[0]
        if phi_t.shape[0] != B:  # the two lockstep echoes: the loss is a mean over B samples
            return torch.cat(
                [self._step_signal(p, y[:, t - 1], T, False)[0] for p in phi_t.split(B)]
            )
        return self._step_signal(phi_t, y[:, t - 1], T, False)[0]

    def _backward(self, x: torch.Tensor, y: torch.Tensor, state: Any) -> tuple:
        cell = self.model.cell
        h = cell.dt
        T = x.shape[1]
        readout = self.model.readout
        self._S_fwd = None
        # 1. inference pass (no graph; nothing per step is kept)
        phi, pi = self.model.initial_state(x, state)
        phi, pi = phi.to(x.dtype), pi.to(x.dtype)
        acc = torch.zeros_like(phi)
        gnorm = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
        loss = x.new_zeros(())
        with torch.no_grad():
            for t in range(T):
                phi, pi, phi_half = leapfrog_step(cell, phi, pi, x[:, t])
                self._fwd_hook(phi_half, x[:, t], T)
                if readout == "mean":
                    acc += phi
                elif readout == "sequence":
                    g, lt = self._step_signal(phi, y[:, t], T, True)
                    loss = loss + lt
                    gnorm += g.norm(dim=1)
        c = None
        if readout != "sequence":
            r = acc / T if readout == "mean" else phi
            c, loss = self._readout_signal(r.to(next(self.model.head.parameters()).dtype), y)
            c = c.to(x.dtype)
            gnorm = c.norm(dim=1)
        g_T = self._signal(phi, T, T, c, y)

        # eps per sample (nudge) and statistic weights 1/eps
        scale = torch.sqrt((phi * phi + pi * pi).mean(dim=1)).clamp_min(1e-3)
        if self.eps == "auto":
            if self.mode == "two_pass":  # S_fwd is a batch sum: one eps for the batch
                e = _AUTO_TARGET * scale.mean() / gnorm.max().clamp_min(1e-30)
                eps_b = e.expand_as(gnorm).clone()
            else:
                eps_b = _AUTO_TARGET * scale / gnorm.clamp_min(1e-30)
        else:
            eps_b = torch.full_like(gnorm, float(self.eps))
        w = 1.0 / eps_b

        if self.mode == "linearized":
            grads = self._linearized(x, y, phi, pi, g_T, c)
            return grads, loss, 0.0
        # 2. echo pass(es): centered runs +eps and -eps in lockstep as one batch of 2B
        if self.mode == "centered":
            sign = torch.cat([torch.ones_like(eps_b), -torch.ones_like(eps_b)])
            ep = torch.cat([eps_b, eps_b]) * sign
            phi_e, pi_e = torch.cat([phi, phi]), torch.cat([-pi, -pi])
            xx = torch.cat([x, x])
            yy = y
            cc = torch.cat([c, c]) if c is not None else None
            ww = torch.cat([w, w]) * sign / 2.0
        else:
            ep, phi_e, pi_e, xx, yy, cc, ww = eps_b, phi, -pi, x, y, c, w
        g = g_T if readout != "sequence" else self._signal(phi_e, T, T, cc, yy)
        if g is not None:
            pi_e = pi_e + ep[:, None] * (g if g.shape[0] == ep.shape[0] else torch.cat([g, g]))
        S = None
        with torch.no_grad():
            for t in range(T, 0, -1):
                u = xx[:, t - 1]
                phi_e, pi_e, phi_half = leapfrog_step(cell, phi_e, pi_e, u)
                S = _add(S, self._stat(phi_half, u, ww))
                if t > 1:
                    g = self._signal(phi_e, t - 1, T, cc, yy)
                    if g is not None:
                        if g.shape[0] != ep.shape[0]:
                            g = torch.cat([g, g])
                        pi_e = pi_e + ep[:, None] * g
        # 3. gradient from the difference of statistics
        if self.mode == "two_pass":
            S = [s - f * w[0] for s, f in zip(S, self._S_fwd, strict=True)]
        grads = self._finish(S, h)
        return grads, loss, float(eps_b.mean())

    def _finish(self, S: list[torch.Tensor], h: float) -> list[torch.Tensor]:
        raise NotImplementedError

    def _linearized(self, x, y, phi, pi, g_T, c) -> list[torch.Tensor]:  # noqa: ANN001
        """Exact eps -> 0 limit: forward-mode tangent of the echo pass w.r.t. eps."""
        cell = self.model.cell
        h = cell.dt
        T = x.shape[1]
        phi_e, pi_e = phi, -pi
        dphi = torch.zeros_like(phi)
        dpi = torch.zeros_like(pi) if g_T is None else g_T.clone()
        out = None
        with torch.no_grad():
            for t in range(T, 0, -1):
                u = x[:, t - 1]
                phi_half = phi_e + 0.5 * h * pi_e
                dphi_half = dphi + 0.5 * h * dpi
                f = cell.force(phi_half, u)
                df = cell.force_jvp(phi_half, u, dphi_half)
                pi_e = pi_e + h * f
                dpi = dpi + h * df
                phi_e = phi_half + 0.5 * h * pi_e
                dphi = dphi_half + 0.5 * h * dpi
                out = _add(out, cell.force_param_vjp(phi_half, u, dphi_half))
                if t > 1:
                    g = self._signal(phi_e, t - 1, T, c, y)
                    if g is not None:
                        dpi = dpi + g
        return [h * o for o in out]


def _add(acc: list[torch.Tensor] | None, new: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:
    if acc is None:
        return [n.clone() for n in new]
    for a, n in zip(acc, new, strict=True):
        a.add_(n)
    return acc


class HamiltonianEcho(_EchoBase):
    r"""Hamiltonian Echo Learning: BPTT gradients from an inference and an echo pass.

    For a separable Hamiltonian ``H = |pi|^2/2 + V(phi; theta, u)`` integrated with leapfrog:

    .. math::
        \frac{dL}{d\theta} = -h \lim_{\epsilon\to0}
        \frac{S(+\epsilon) - S(-\epsilon)}{2\epsilon},\qquad
        S(\epsilon) = \sum_{t} \nabla_\theta V(\phi^{e}_{t-1/2}(\epsilon); u_t),

    where the echo starts at ``(phi_T, -pi_T + eps g_T)``, re-runs the same dynamics
    backwards in time and is nudged by ``eps g_{t-1}`` after each step. For the dense Hopfield
    oscillator this is the contrastive Hebbian rule
    ``grad_A = h/(4 eps) sum_t [s s^T(echo+) - s s^T(echo-)]``.

    Args:
        model: An :class:`~hel.models.EchoRNN` whose cell is a
            :class:`~hel.cells.HamiltonianCell`.
        loss_fn: Scalar loss ``loss_fn(output, target)``.
        eps: Nudge strength (> 0) or ``"auto"``: per sample,
            ``eps_b = 3e-3 * rms(state_b) / sum_t |g_t,b|`` (one eps per batch in two_pass).
        mode: ``"centered"`` (echoes at +eps and -eps, 3 passes, O(eps^2) bias),
            ``"two_pass"`` (one echo against the inference pass's own statistics, 2 passes,
            O(eps) bias) or ``"linearized"`` (forward-mode tangent, the exact eps -> 0 limit).
        dtype: Optionally run the passes in ``torch.float64`` (or float32).

    References:
        Hamiltonian Echo Learning: spatio-temporal sum-separability, dense Hopfield-inspired
        oscillatory RNNs and Echo Learning (NeurIPS 2026); Lopez-Pastor & Marquardt,
        "Self-learning machines based on Hamiltonian echo backpropagation", PRX 2023.

    Example:
        >>> import torch
        >>> from hel import EchoRNN, HamiltonianEcho, HopfieldOscillatorCell
        >>> model = EchoRNN(HopfieldOscillatorCell(1, 8), output_size=2)
        >>> est = HamiltonianEcho(model, torch.nn.CrossEntropyLoss())
        >>> loss = est.backward(torch.randn(4, 30, 1), torch.tensor([0, 1, 0, 1]))
        >>> model.cell.A.grad.shape
        torch.Size([8, 8])
    """

    name = "hel"

    def __init__(
        self,
        model: EchoRNN,
        loss_fn: Any,
        eps: float | str = "auto",
        mode: str = "centered",
        dtype: torch.dtype | None = None,
    ) -> None:
        if isinstance(model, EchoRNN) and not isinstance(model.cell, HamiltonianCell):
            raise TypeError(
                f"HamiltonianEcho needs a cell with a potential (a HamiltonianCell); "
                f"{type(model.cell).__name__} only defines a force: use EchoLearning instead"
            )
        super().__init__(model, loss_fn, eps, mode, dtype)

    def _stat(self, phi_half, u, w):  # noqa: ANN001, ANN202
        return self.model.cell.potential_param_grad(phi_half, u, w)

    def _fwd_hook(self, phi_half: torch.Tensor, u: torch.Tensor, T: int) -> None:
        if self.mode == "two_pass":  # the free echo retraces the inference pass
            self._S_fwd = _add(self._S_fwd, self.model.cell.potential_param_grad(phi_half, u))

    def _finish(self, S, h):  # noqa: ANN001, ANN202
        return [-h * s for s in S]


class EchoLearning(_EchoBase):
    r"""Echo Learning for arbitrary (non-Hamiltonian) force fields (inferred form).

    .. math::
        \frac{dL}{d\theta} \approx h \sum_t
        \Big(\frac{\partial f}{\partial\theta}(\bar\phi^{e}_{t-1/2})\Big)^{\!\top}
        \frac{\phi^{e}_{t-1/2}(+\epsilon) - \phi^{e}_{t-1/2}(-\epsilon)}{2\epsilon}

    (one vector-Jacobian product per step, at the mid-point of the two echoes). Exact iff the
    step is reversible (no damping) and the force Jacobian ``df/dphi`` is symmetric along the
    trajectory; ``homeostasis > 0`` adds the gradient of
    ``homeostasis * homeostatic_loss`` (accumulated online during the inference pass), which
    drives the network towards that condition.

    Args:
        model: An :class:`~hel.models.EchoRNN` with any :class:`~hel.cells.ForceCell`.
        loss_fn: Scalar loss.
        eps: Nudge strength or ``"auto"`` (as in :class:`HamiltonianEcho`).
        homeostasis: Weight (>= 0) of the homeostatic loss.
        mode: ``"centered"`` or ``"linearized"``.
        dtype: Optional compute dtype.

    References:
        Hamiltonian Echo Learning ... and Echo Learning (NeurIPS 2026).

    Example:
        >>> import torch
        >>> from hel import EchoLearning, EchoRNN, RateEchoCell
        >>> model = EchoRNN(RateEchoCell(1, 8), output_size=2)
        >>> est = EchoLearning(model, torch.nn.CrossEntropyLoss(), homeostasis=1e-2)
        >>> loss = est.backward(torch.randn(4, 30, 1), torch.tensor([0, 1, 0, 1]))
    """

    name = "el"
    _modes = ("centered", "linearized")

    def __init__(
        self,
        model: EchoRNN,
        loss_fn: Any,
        eps: float | str = "auto",
        homeostasis: float = 0.0,
        mode: str = "centered",
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(model, loss_fn, eps, mode, dtype)
        if isinstance(homeostasis, bool) or not isinstance(homeostasis, int | float):
            raise TypeError(f"homeostasis must be a number >= 0, got {homeostasis!r}")
        if not homeostasis >= 0:
            raise ValueError(f"homeostasis must be >= 0, got {homeostasis}")
        self.homeostasis = float(homeostasis)
        if not isinstance(model.cell, ForceCell):  # pragma: no cover - EchoRNN checks this
            raise TypeError("EchoLearning needs a ForceCell")

    def backward(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        self._homeo_value = 0.0
        loss = super().backward(x, y, state)
        self.last_stats["homeostatic_loss"] = self._homeo_value
        return loss

    def _fwd_hook(self, phi_half: torch.Tensor, u: torch.Tensor, T: int) -> None:
        if self.homeostasis == 0.0:
            return
        value, grads = homeostatic_loss_grad(self.model.cell, phi_half)
        self._homeo_value += value / T
        accumulate(self.cell_params, [(self.homeostasis / T) * g for g in grads])

    def _stat(self, phi_half, u, w):  # noqa: ANN001, ANN202
        B = phi_half.shape[0] // 2
        plus, minus = phi_half[:B], phi_half[B:]
        mid = 0.5 * (plus + minus)
        cot = (plus - minus) * w[:B, None]  # w already holds 1/(2 eps_b)
        return self.model.cell.force_param_vjp(mid, u[:B], cot)

    def _finish(self, S, h):  # noqa: ANN001, ANN202
        return [h * s for s in S]
