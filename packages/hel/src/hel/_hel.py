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

import math
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from hel._chunks import StatChunks
from hel._estimator import (
    GradientEstimator,
    accumulate,
    check_eps,
    check_finite,
    check_finite_state,
)
from hel._reversibility import (
    AUTO_RETRIES,
    Anchors,
    ReversibilityReport,
    check_checkpoint_every,
    rerun_interval,
)
from hel.cells import ForceCell, HamiltonianCell, leapfrog_step
from hel.homeostasis import homeostatic_loss_grad
from hel.models import EchoRNN

__all__ = ["MODES", "EchoLearning", "HamiltonianEcho", "resolve_mode"]

MODES = ("centered", "two_pass", "linearized")
#: ``mode="auto"``: what it resolves to (see :func:`resolve_mode`).
AUTO = "auto"
_AUTO_TARGET = 3e-3  # accumulated nudge / state RMS for eps="auto" (float32 guidance)
#: Default reversibility tolerance (relative RMS reconstruction error), per compute dtype:
#: measured on the default network, centered cosines to BPTT fell below 0.9999 above ~1e-3
#: (float64) and ~3e-4 (float32); see the README's long-sequence table.
DEFAULT_TOLERANCE = {torch.float32: 3e-4, torch.float64: 1e-3}


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


def resolve_mode(cell: ForceCell, modes: tuple[str, ...] = MODES) -> str:
    """What ``mode="auto"`` runs: ``"linearized"`` where the cell has an analytic tangent.

    The linearized echo is the exact ``eps -> 0`` limit of the centred one (no finite-nudge
    bias, no nonlinear growth of the nudged part on long chaotic runs); it needs the force's
    forward tangent, which a cell provides by overriding :meth:`ForceCell.force_jvp` (the
    built-in cells do). Other cells get ``"centered"``.
    """
    analytic = type(cell).force_jvp is not ForceCell.force_jvp
    return "linearized" if analytic and "linearized" in modes else "centered"


def _restore_grads(model: torch.nn.Module, before: list[torch.Tensor | None]) -> None:
    """Put every parameter's ``.grad`` back to a snapshot (a discarded attempt's gradients)."""
    for p, g in zip(model.parameters(), before, strict=True):
        p.grad = None if g is None else g.to(p.dtype).clone()  # the pass may run in float64


@dataclass
class _Inference:
    """What the inference pass leaves for the echo (all ``O(1)`` in ``T``)."""

    phi: torch.Tensor
    pi: torch.Tensor
    c: torch.Tensor | None  # dL/d(readout) for "mean"/"last"
    loss: torch.Tensor
    gnorm: torch.Tensor  # per-sample accumulated |g_t|
    scale: torch.Tensor  # per-sample RMS of the final state (the echo errors' unit)
    anchors: Anchors


class _EchoBase(GradientEstimator):
    """Shared machinery of the echo estimators (inference pass, eps, echo loop)."""

    _modes: tuple[str, ...] = MODES
    _S_fwd: StatChunks  # the inference pass's own statistic (HamiltonianEcho two_pass)

    def __init__(
        self,
        model: EchoRNN,
        loss_fn: Any,
        eps: float | str = "auto",
        mode: str = "centered",
        dtype: torch.dtype | None = None,
        checkpoint_every: int | str | None = None,
        tolerance: float | None = None,
    ) -> None:
        super().__init__(model, loss_fn)
        self.eps = check_eps(eps)
        if mode != AUTO and mode not in self._modes:
            raise ValueError(f"mode must be 'auto' or one of {self._modes}, got {mode!r}")
        if dtype not in (None, torch.float32, torch.float64):
            raise TypeError(f"dtype must be None, torch.float32 or torch.float64, got {dtype}")
        mode = resolve_mode(model.cell, self._modes) if mode == AUTO else mode
        self.checkpoint_every = check_checkpoint_every(checkpoint_every)
        if self.checkpoint_every is not None and mode == "two_pass":
            if self.checkpoint_every != AUTO:
                raise ValueError(
                    "checkpoint_every needs mode='centered' or 'linearized': the single "
                    "two_pass echo cannot be split into its free and nudged parts"
                )
            self.checkpoint_every = None  # nothing to monitor, nothing to re-anchor
        #: The interval ``checkpoint_every="auto"`` settled on (``None``: none needed yet).
        self.auto_interval: int | None = None
        self._interval: int | None = None  # the interval of the running backward call
        if tolerance is not None and (
            isinstance(tolerance, bool)
            or not isinstance(tolerance, int | float)
            or not math.isfinite(tolerance)
            or tolerance <= 0
        ):
            raise ValueError(f"tolerance must be None or a finite number > 0, got {tolerance!r}")
        self.tolerance = tolerance
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
    def _stat(
        self, phi_half: torch.Tensor, u: torch.Tensor, w: torch.Tensor | None
    ) -> tuple[torch.Tensor, ...]:
        """Weighted local statistic of a chunk of echo steps (``(k, R, .)`` tensors)."""
        raise NotImplementedError

    def _fwd_hook(self, phi_half: torch.Tensor, u: torch.Tensor, T: int) -> None:
        """Per-step work during the inference pass (HEL two_pass, EL homeostasis)."""

    def _fwd_start(self) -> None:
        """Reset the inference pass's own accumulators."""

    # -------------------------------------------------------------- the algorithm
    def backward(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        self._check(x, y)
        cell = self.model.cell
        auto = self.checkpoint_every == AUTO
        cp = self.checkpoint_every
        self._interval = self.auto_interval if isinstance(cp, str) else cp
        before = [None if p.grad is None else p.grad.clone() for p in self.model.parameters()]
        with _cast(cell, self.dtype), cell.frozen():
            xc = x.to(self.dtype or x.dtype)
            last = math.inf
            for attempt in range(AUTO_RETRIES + 1):
                grads, loss, eps_used, anchors = self._backward(xc, y, state)
                rep = anchors.report if anchors else None
                if not auto or rep is None:
                    break
                nxt = rerun_interval(rep, self._interval, last, attempt, xc.shape[1], xc.dtype)
                if nxt is None:
                    break
                last = rep.max_error
                # missed: re-run with re-anchoring at a shorter interval; undo the head's
                # (and EL's homeostatic) gradients the discarded attempt accumulated
                self._interval = nxt
                self.auto_interval = nxt
                _restore_grads(self.model, before)
        check_finite(type(self).__name__, cell, grads)
        accumulate(self.cell_params, grads)
        self.last_stats = {
            "passes": 2 if self.mode != "centered" else 3,
            "stored_steps": anchors.stored_steps if anchors else 0,
            "eps": eps_used,
            "mode": self.mode,
            "checkpoint_every": self._interval,
            "attempts": attempt + 1,
            "reversibility": anchors.finish(x.shape[1]) if anchors else None,
        }
        return loss.to(x.dtype)

    @property
    def reversibility(self) -> ReversibilityReport | None:
        """The reversibility report of the last :meth:`backward` (``None`` for two_pass)."""
        return self.last_stats.get("reversibility")

    def _signal(
        self, phi_t: torch.Tensor, t: int, T: int, c: torch.Tensor | None, y: torch.Tensor
    ) -> torch.Tensor | None:
        """Error signal ``g_t = dL/dphi_t`` (1-based ``t``) evaluated at position ``phi_t``."""
        readout = self.model.readout
        if readout != "sequence":
            assert c is not None, "the inference pass sets c for 'mean' and 'last'"
            if readout == "mean":
                return c / T
            return c if t == T else None
        B = y.shape[0]
        if phi_t.shape[0] != B:  # the two lockstep echoes: the loss is a mean over B samples
            return torch.cat(
                [self._step_signal(p, y[:, t - 1], T, False)[0] for p in phi_t.split(B)]
            )
        return self._step_signal(phi_t, y[:, t - 1], T, False)[0]

    def _inference(self, x: torch.Tensor, y: torch.Tensor, state: Any) -> _Inference:
        """1. Inference pass without a graph; keeps only the anchor states."""
        cell, readout, T = self.model.cell, self.model.readout, x.shape[1]
        self._fwd_start()
        phi, pi = self.model.initial_state(x, state)
        phi, pi = phi.to(x.dtype), pi.to(x.dtype)
        tol = self.tolerance if self.tolerance is not None else DEFAULT_TOLERANCE[x.dtype]
        anchors = Anchors(T, self._interval, None, tol, x.dtype)
        if self.mode == "two_pass":
            anchors.steps = set()  # its single echo has no free part to compare
        acc = torch.zeros_like(phi)
        gnorm = torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
        loss = x.new_zeros(())
        with torch.no_grad():
            for t in range(T):
                anchors.record(t, phi, pi)
                phi, pi, phi_half = leapfrog_step(cell, phi, pi, x[:, t])
                self._fwd_hook(phi_half, x[:, t], T)
                if readout == "mean":
                    acc += phi
                elif readout == "sequence":
                    g, lt = self._step_signal(phi, y[:, t], T, True)
                    loss = loss + lt
                    gnorm += g.norm(dim=1)
        check_finite_state(type(self).__name__, cell, phi)
        c = None
        if readout != "sequence":
            r = acc / T if readout == "mean" else phi
            c, loss = self._readout_signal(r.to(next(self.model.head.parameters()).dtype), y)
            c = c.to(x.dtype)
            gnorm = c.norm(dim=1)
        scale = torch.sqrt((phi * phi + pi * pi).mean(dim=1)).clamp_min(1e-3)
        anchors.scale = scale
        return _Inference(phi, pi, c, loss, gnorm, scale, anchors)

    def _eps(self, fwd: _Inference) -> torch.Tensor:
        """Per-sample nudge strength (one value for the batch in two_pass)."""
        scale, gnorm = fwd.scale, fwd.gnorm
        if self.eps != "auto":
            return torch.full_like(gnorm, float(self.eps))
        if self.mode == "two_pass":  # S_fwd is a batch sum: one eps for the batch
            e = _AUTO_TARGET * scale.mean() / gnorm.max().clamp_min(1e-30)
            return e.expand_as(gnorm).clone()
        return _AUTO_TARGET * scale / gnorm.clamp_min(1e-30)

    def _backward(self, x: torch.Tensor, y: torch.Tensor, state: Any) -> tuple:
        fwd = self._inference(x, y, state)
        if self.mode == "linearized":
            return self._linearized(x, y, fwd), fwd.loss, 0.0, fwd.anchors
        eps_b = self._eps(fwd)
        S = self._echo(x, y, fwd, eps_b)
        anchors: Anchors | None = fwd.anchors
        if self.mode == "two_pass":  # 3. minus the inference pass's own statistic
            S = [s - f / eps_b[0] for s, f in zip(S, self._S_fwd.result(), strict=True)]
            anchors = None  # nothing monitored
        return self._finish(S, self.model.cell.dt), fwd.loss, float(eps_b.mean()), anchors

    def _echo(
        self, x: torch.Tensor, y: torch.Tensor, fwd: _Inference, eps_b: torch.Tensor
    ) -> list[torch.Tensor]:
        """2. Echo pass(es); centered runs +eps and -eps in lockstep as one batch of 2B."""
        cell, T = self.model.cell, x.shape[1]
        w = 1.0 / eps_b
        if self.mode == "centered":
            sign = torch.cat([torch.ones_like(eps_b), -torch.ones_like(eps_b)])
            ep = torch.cat([eps_b, eps_b]) * sign
            phi_e, pi_e = torch.cat([fwd.phi, fwd.phi]), torch.cat([-fwd.pi, -fwd.pi])
            xx = torch.cat([x, x])
            cc = torch.cat([fwd.c, fwd.c]) if fwd.c is not None else None
            ww = torch.cat([w, w]) * sign / 2.0
        else:
            ep, phi_e, pi_e, xx, cc, ww = eps_b, fwd.phi, -fwd.pi, x, fwd.c, w
        rows = ep.shape[0]
        target = eps_b * fwd.gnorm.clamp_min(1e-30)  # size of the accumulated nudge
        g = self._signal(phi_e, T, T, cc, y)
        if g is not None:
            pi_e = pi_e + ep[:, None] * (g if g.shape[0] == rows else torch.cat([g, g]))
        chunks = StatChunks(self._stat)
        anchors = fwd.anchors
        with torch.no_grad():
            for t in range(T, 0, -1):
                u = xx[:, t - 1]
                phi_e, pi_e, phi_half = leapfrog_step(cell, phi_e, pi_e, u)
                chunks.push(phi_half, u, ww)
                if t > 1:
                    g = self._signal(phi_e, t - 1, T, cc, y)
                    if g is not None:
                        pi_e = pi_e + ep[:, None] * (g if g.shape[0] == rows else torch.cat([g, g]))
                if t - 1 in anchors.states:
                    phi_e, pi_e, r = anchors.centered(t - 1, phi_e, pi_e, target)
                    if r is not None:  # the nudged part was divided by r: so are later nudges
                        ep, ww = ep / torch.cat([r, r]), ww * torch.cat([r, r])
        return chunks.result()

    def _finish(self, S: list[torch.Tensor], h: float) -> list[torch.Tensor]:
        """Turn the accumulated echo statistics ``S`` into parameter gradients (per mode)."""
        raise NotImplementedError

    def _linearized(self, x: torch.Tensor, y: torch.Tensor, fwd: _Inference) -> list:
        """Exact eps -> 0 limit: forward-mode tangent of the echo pass w.r.t. eps."""
        cell = self.model.cell
        h, T = cell.dt, x.shape[1]
        phi_e, pi_e = fwd.phi, -fwd.pi
        g_T = self._signal(phi_e, T, T, fwd.c, y)
        dphi = torch.zeros_like(phi_e)
        dpi = torch.zeros_like(pi_e) if g_T is None else g_T.clone()

        def stat(ph: torch.Tensor, u: torch.Tensor, cot: torch.Tensor | None) -> tuple:
            assert cot is not None, "every step pushes its tangent"
            return cell.force_param_vjp(ph.flatten(0, 1), u.flatten(0, 1), cot.flatten(0, 1))

        chunks = StatChunks(stat)
        with torch.no_grad():
            for t in range(T, 0, -1):
                u = x[:, t - 1]
                phi_half = phi_e + 0.5 * h * pi_e
                dphi_half = dphi + 0.5 * h * dpi
                pi_e = pi_e + h * cell.force(phi_half, u)
                dpi = dpi + h * cell.force_jvp(phi_half, u, dphi_half)
                phi_e = phi_half + 0.5 * h * pi_e
                dphi = dphi_half + 0.5 * h * dpi
                chunks.push(phi_half, u, dphi_half)
                if t > 1:
                    g = self._signal(phi_e, t - 1, T, fwd.c, y)
                    if g is not None:
                        dpi = dpi + g
                if t - 1 in fwd.anchors.states:
                    phi_e, pi_e = fwd.anchors.base(t - 1, phi_e, pi_e)
        return [h * o for o in chunks.result()]


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
        mode: ``"auto"`` (default: ``"linearized"`` when the cell has an analytic force
            tangent, as the built-in cells do, else ``"centered"``; see
            :func:`resolve_mode`), ``"centered"`` (echoes at +eps and -eps, 3 passes,
            O(eps^2) bias), ``"two_pass"`` (one echo against the inference pass's own
            statistics, 2 passes, O(eps) bias) or ``"linearized"`` (forward-mode tangent of
            the echo, the exact eps -> 0 limit, 2 passes).
        dtype: Optionally run the passes in ``torch.float64`` (or float32).
        checkpoint_every: ``K`` to keep the inference state every ``K`` steps
            (``O(T/K)`` memory) and re-anchor the echo there: its free part is reset to the
            stored state and its nudged part rescaled to the initial nudge's size. Keeps the
            gradient BPTT-exact on long chaotic runs (centered and linearized modes).
            ``"auto"`` (default): start with no checkpoints (constant memory, the echo only
            monitored); when the monitor reports an error above ``tolerance``, re-run the
            call with an interval predicted from the monitored errors' growth rate
            (``u exp(lambda d)`` from the unit roundoff ``u``, aimed at a tenth of the
            tolerance; at most 4 re-runs, stopping when a shorter interval no longer lowers
            the error) and keep that interval for later calls
            (:attr:`auto_interval`; ``last_stats["checkpoint_every"]``). ``None``: never
            re-anchor (constant memory, monitoring only).
        tolerance: Relative reconstruction error above which ``backward`` warns with
            :class:`~hel.ReversibilityWarning` (default 1e-3 in float64, 3e-4 in float32);
            with ``checkpoint_every="auto"`` it also triggers the re-run.

    After ``backward``, :attr:`reversibility` (also ``last_stats["reversibility"]``) reports
    how far the echo's reconstruction of the initial state, and of four evenly spaced
    states on the way (or of every checkpoint), missed the stored ones.

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
        mode: str = "auto",
        dtype: torch.dtype | None = None,
        checkpoint_every: int | str | None = "auto",
        tolerance: float | None = None,
    ) -> None:
        if isinstance(model, EchoRNN) and not isinstance(model.cell, HamiltonianCell):
            raise TypeError(
                f"HamiltonianEcho needs a cell with a potential (a HamiltonianCell); "
                f"{type(model.cell).__name__} only defines a force: use EchoLearning instead"
            )
        super().__init__(model, loss_fn, eps, mode, dtype, checkpoint_every, tolerance)

    def _stat(self, phi_half, u, w):  # noqa: ANN001, ANN202
        cell = self.model.cell
        assert isinstance(cell, HamiltonianCell), "checked in __init__"
        flat = (phi_half.flatten(0, 1), u.flatten(0, 1))
        return cell.potential_param_grad(*flat, None if w is None else w.flatten())

    def _fwd_start(self) -> None:
        self._S_fwd = StatChunks(self._stat)

    def _fwd_hook(self, phi_half: torch.Tensor, u: torch.Tensor, T: int) -> None:
        if self.mode == "two_pass":  # the free echo retraces the inference pass
            self._S_fwd.push(phi_half, u, None)

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
        checkpoint_every: Re-anchoring interval (as in :class:`HamiltonianEcho`).
        tolerance: Reversibility warning threshold (as in :class:`HamiltonianEcho`).

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
        checkpoint_every: int | str | None = None,
        tolerance: float | None = None,
    ) -> None:
        super().__init__(model, loss_fn, eps, mode, dtype, checkpoint_every, tolerance)
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
        B = phi_half.shape[1] // 2
        plus, minus = phi_half[:, :B].flatten(0, 1), phi_half[:, B:].flatten(0, 1)
        mid = 0.5 * (plus + minus)
        cot = (plus - minus) * w[:, :B].flatten()[:, None]  # w already holds 1/(2 eps_b)
        return self.model.cell.force_param_vjp(mid, u[:, :B].flatten(0, 1), cot)

    def _finish(self, S, h):  # noqa: ANN001, ANN202
        return [h * s for s in S]
