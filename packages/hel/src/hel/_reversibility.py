"""The echo's reversibility monitor and its checkpoint remedy.

The echo is exact only while it retraces the inference pass. Two things break that on long,
chaotic runs: rounding errors of the reversed steps grow like ``exp(lambda t)`` (the echo's
free part drifts off the stored trajectory), and the nudged part of the echo (the adjoint,
``eps`` times the BPTT error signal) grows at the same rate until it leaves the linear regime
in which the finite difference ``(S(+eps) - S(-eps)) / 2 eps`` is the derivative.

:class:`Anchors` keeps the inference state at a few steps: by default ``(T = 0)`` and four
evenly spaced points (constant memory, only to *measure*); with ``checkpoint_every=K`` at
every ``K``-th step (``O(T/K)`` memory), where the echo is also *re-anchored*: its free part
(the midpoint of the +eps and -eps echoes, or the linearized echo's base trajectory) is reset
to the stored state and its nudged part is rescaled back to the size of the initial nudge
(the later nudges and the statistics' weights are rescaled with it, so the estimate is
unchanged in the linear limit).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import torch

__all__ = [
    "Anchors",
    "ReversibilityReport",
    "ReversibilityWarning",
    "check_checkpoint_every",
    "next_interval",
    "rerun_interval",
    "warning_text",
]

N_MONITOR = 4  # interior monitor points without checkpoints (plus the initial state)


class ReversibilityWarning(UserWarning):
    """The echo did not retrace the inference pass within the tolerance."""


@dataclass
class ReversibilityReport:
    """How well the echo retraced the inference pass in one ``backward`` call.

    Attributes:
        errors: ``{t: error}`` at the monitored steps (``t = 0`` is the initial state): the
            RMS distance of the echo's reconstructed free state ``(phi_t, pi_t)`` from the
            stored one, relative to the RMS of the final state (largest over the batch),
            measured before any re-anchoring.
        response: The largest size of the echo's nudged part seen at a monitored step,
            relative to the initial accumulated nudge (``>> 1``: the nudged echo grew far
            beyond the nudge, the chaotic regime; ``nan`` for the linearized mode).
        tolerance: The tolerance the errors were compared with.
        checkpoint_every: The re-anchoring interval (``None``: monitoring only).
    """

    errors: dict[int, float] = field(default_factory=dict)
    response: float = float("nan")
    tolerance: float = 0.0
    checkpoint_every: int | None = None

    @property
    def max_error(self) -> float:
        """Largest monitored reconstruction error (``inf`` if any is NaN or inf)."""
        values = list(self.errors.values())
        if not all(math.isfinite(e) for e in values):
            return math.inf  # a NaN must not hide behind max()'s order-dependent comparison
        return max(values, default=float("nan"))

    @property
    def ok(self) -> bool:
        """``True`` when every monitored error is within the tolerance."""
        return bool(self.max_error <= self.tolerance)


def check_checkpoint_every(value: object) -> int | str | None:
    """Validate ``checkpoint_every``: ``None``, ``"auto"`` or an integer >= 1."""
    if value is None or (isinstance(value, str) and value == "auto"):
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"checkpoint_every must be None, 'auto' or an integer >= 1, got {value!r}")
    return value


#: ``checkpoint_every="auto"`` aims each re-anchored stretch at this fraction of the tolerance.
AUTO_MARGIN = 0.1
#: Re-runs of one ``backward`` call at most (each with a shorter interval).
AUTO_RETRIES = 4


def next_interval(rep: ReversibilityReport, T: int, dtype: torch.dtype) -> int:
    """A shorter re-anchoring interval after ``rep`` missed its tolerance.

    Rounding errors of the reversed steps grow like ``u exp(lambda d)`` over ``d`` steps
    (``u`` the unit roundoff of ``dtype``). Each monitored error ``e_t`` gives a rate
    ``lambda_t = log(e_t / u) / d_t``, with ``d_t`` the steps since the echo was last exact
    (its start, or the previous checkpoint); the fastest rate sets the interval at which the
    predicted error is :data:`AUTO_MARGIN` times the tolerance. The result is at most half the
    longest stretch that failed, at least 1.
    """
    u = float(torch.finfo(dtype).eps)
    K = rep.checkpoint_every
    target = max(AUTO_MARGIN * rep.tolerance, 4 * u)
    candidates, longest = [], 1
    for t, e in rep.errors.items():
        d = T - t if K is None else min(K, T - t)
        if d <= 0:
            continue
        if not math.isfinite(e) or e > rep.tolerance:
            longest = max(longest, d)
        if not math.isfinite(e):
            candidates.append(d // 4)  # the echo diverged: no rate to read, a quarter of d
        elif e > u:  # e = u exp(rate d): the interval where u exp(rate k) = target
            candidates.append(int(d * math.log(target / u) / math.log(e / u)))
    return max(1, min([*candidates, longest // 2]))


def rerun_interval(
    rep: ReversibilityReport,
    interval: int | None,
    last_error: float,
    attempt: int,
    T: int,
    dtype: torch.dtype,
) -> int | None:
    """The stop rule of ``checkpoint_every="auto"``: the interval to re-run with, or ``None``.

    After attempt number ``attempt`` (0-based) ran with re-anchoring ``interval`` (``None``:
    none) and produced ``rep``, the call is re-run with :func:`next_interval` unless

    * the monitored errors are within the tolerance (``rep.ok``),
    * :data:`AUTO_RETRIES` re-runs were already made,
    * the interval is already 1 (nothing shorter exists), or
    * this was a re-run and it did not lower the largest error at all compared with the
      previous attempt's ``last_error`` (the error is then not the rounding growth that a
      shorter interval removes). Any decrease continues: requiring a halving stopped a
      ``T = 20000`` run whose error was saturated at 0.33 after one re-run.

    The first attempt always re-runs when it missed, a diverged (``inf``/NaN) one included.
    """
    if rep.ok or attempt >= AUTO_RETRIES or interval == 1:
        return None
    if attempt > 0 and not rep.max_error < last_error:
        return None
    return next_interval(rep, T, dtype)


class Anchors:
    """Inference states kept at a few steps; checks (and re-anchors) the echo there.

    Args:
        T: Sequence length.
        checkpoint_every: ``K`` to re-anchor at every ``K``-th step, ``None`` to monitor only.
        scale: Per-sample RMS of the final state ``(B,)`` (the errors' unit).
        tolerance: Warning threshold of the relative reconstruction error.
        dtype: The dtype the echo runs in (the warning advises float64 only to a float32 run).
    """

    def __init__(
        self,
        T: int,
        checkpoint_every: int | None,
        scale: torch.Tensor | None,
        tolerance: float,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        if checkpoint_every is None:
            steps = {0} | {round(T * j / (N_MONITOR + 1)) for j in range(1, N_MONITOR + 1)}
        else:
            steps = set(range(0, T, checkpoint_every))
            checkpoint_every = int(checkpoint_every)
        self.steps = steps - {T}
        self.reanchor = checkpoint_every is not None
        self.states: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.scale = scale
        self.report = ReversibilityReport(tolerance=tolerance, checkpoint_every=checkpoint_every)
        self._response = 0.0
        self.dtype = dtype

    @property
    def stored_steps(self) -> int:
        """Trajectory states kept for re-anchoring (0 when only monitoring)."""
        return len(self.states) if self.reanchor else 0

    def record(self, t: int, phi: torch.Tensor, pi: torch.Tensor) -> None:
        """Keep the inference state at step ``t`` if it is an anchor."""
        if t in self.steps:
            self.states[t] = (phi.clone(), pi.clone())

    def _log(self, t: int, dphi: torch.Tensor, dpi: torch.Tensor) -> None:
        rms = torch.sqrt(0.5 * (dphi * dphi + dpi * dpi).mean(dim=1))
        assert self.scale is not None, "the inference pass sets the scale before the echo"
        self.report.errors[t] = float((rms / self.scale).max())

    def centered(
        self, t: int, phi_e: torch.Tensor, pi_e: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """At step ``t``: measure the +-eps pair (rows ``[:B]``, ``[B:]``); maybe re-anchor.

        Returns ``(phi_e, pi_e, r)``; ``r`` (per sample, >= 1) is the factor the nudged part
        was divided by (``None`` when nothing was rescaled).
        """
        phi_ref, pi_ref = self.states[t]
        B = phi_ref.shape[0]
        mid_phi, d_phi = 0.5 * (phi_e[:B] + phi_e[B:]), 0.5 * (phi_e[:B] - phi_e[B:])
        mid_pi, d_pi = 0.5 * (pi_e[:B] + pi_e[B:]), 0.5 * (pi_e[:B] - pi_e[B:])
        self._log(t, mid_phi - phi_ref, mid_pi + pi_ref)  # the echo runs with flipped momenta
        ratio = torch.sqrt((d_phi * d_phi + d_pi * d_pi).sum(dim=1)) / target
        self._response = max(self._response, float(ratio.max()))
        self.report.response = self._response
        if not self.reanchor:
            return phi_e, pi_e, None
        r = ratio.clamp_min(1.0)
        d_phi, d_pi = d_phi / r[:, None], d_pi / r[:, None]
        phi_e = torch.cat([phi_ref + d_phi, phi_ref - d_phi])
        pi_e = torch.cat([-pi_ref + d_pi, -pi_ref - d_pi])
        return phi_e, pi_e, r

    def base(
        self, t: int, phi_e: torch.Tensor, pi_e: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """At step ``t``: measure an un-nudged (base) echo state; re-anchor it if asked."""
        phi_ref, pi_ref = self.states[t]
        self._log(t, phi_e - phi_ref, pi_e + pi_ref)
        if not self.reanchor:
            return phi_e, pi_e
        return phi_ref.clone(), -pi_ref

    def finish(self, T: int) -> ReversibilityReport:
        """The report; warns with :class:`ReversibilityWarning` above the tolerance."""
        rep = self.report
        if rep.errors and not rep.ok:
            warnings.warn(ReversibilityWarning(warning_text(rep, T, self.dtype)), stacklevel=4)
        return rep


def warning_text(rep: ReversibilityReport, T: int, dtype: torch.dtype) -> str:
    """The :class:`ReversibilityWarning` message for a report over the tolerance.

    The nudged part's growth is named only when it was measured (centred mode; the linearized
    echo has no finite nudge), and float64 is advised only to a run that is not already in it.
    """
    grew = f", nudged part grew {rep.response:.3g}x" if math.isfinite(rep.response) else ""
    remedies = [
        "re-anchor from stored states with checkpoint_every=K (e.g. 100)"
        if rep.checkpoint_every is None
        else f"lower checkpoint_every (now {rep.checkpoint_every})"
    ]
    if dtype != torch.float64:
        remedies.append("run the echo in float64 (dtype=torch.float64)")
    return (
        f"the echo missed the inference trajectory by a relative {rep.max_error:.2e} "
        f"(tolerance {rep.tolerance:.1e}, T = {T}{grew}, {dtype}): the dynamics amplify "
        f"rounding errors and the gradient is not BPTT's; {' or '.join(remedies)}"
    )
