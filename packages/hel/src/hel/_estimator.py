"""The interface every gradient estimator shares: ``loss = est.backward(x, y)`` fills ``p.grad``.

The recurrent core's gradient comes from the estimator; the readout head's gradient is always
plain autograd on the head's own input (identical across estimators). The echo estimators
(the method) live in :mod:`hel._hel`, BPTT, truncated BPTT, e-prop and the frozen-recurrence
control in :mod:`hel.baselines`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from hel.cells import leapfrog_step
from hel.models import EchoRNN

__all__ = ["GradientEstimator", "accumulate", "check_eps", "check_finite", "check_finite_state"]

_HALF = (torch.float16, torch.bfloat16)


def accumulate(params: Iterable[torch.Tensor], grads: Iterable[torch.Tensor]) -> None:
    """Add ``grads`` into ``p.grad`` like autograd does (create when missing).

    Package-internal: every estimator accumulates its core gradient through it.
    """
    for p, g in zip(params, grads, strict=True):
        g = g.detach().to(p.dtype)
        if p.grad is None:
            p.grad = g.clone()
        else:
            p.grad.add_(g)


def check_finite(who: str, cell: nn.Module, grads: Iterable[torch.Tensor]) -> None:
    """Raise ``FloatingPointError`` naming the parameter when a gradient is NaN or inf.

    Package-internal: every estimator checks its core gradient before accumulating it.
    """
    names = [n for n, _ in cell.named_parameters()]
    for name, g in zip(names, grads, strict=True):
        if not torch.isfinite(g).all():
            raise FloatingPointError(
                f"{who} produced a non-finite gradient for {name!r}: {_diverged(cell)}"
            )


def check_finite_state(who: str, cell: nn.Module, phi: torch.Tensor) -> None:
    """Raise ``FloatingPointError`` when the inference pass ended in a NaN or inf state."""
    if not torch.isfinite(phi).all():
        raise FloatingPointError(
            f"{who}: the inference pass reached a non-finite state: {_diverged(cell)}"
        )


def _diverged(cell: nn.Module) -> str:
    return (
        f"the dynamics diverged (dt = {cell.dt}; the leapfrog step is stable only for "
        "dt * sqrt(stiffness) < 2): lower dt or the input scale"
    )


class GradientEstimator:
    """Base class: validates inputs and provides the readout's learning signals.

    Args:
        model: The :class:`~hel.models.EchoRNN` to train.
        loss_fn: A scalar-valued loss module or callable ``loss_fn(output, target)``
            (e.g. ``nn.CrossEntropyLoss()``); ``reduction="none"`` is rejected.

    Attributes:
        last_stats: Diagnostics of the last :meth:`backward` call (``passes``,
            ``stored_steps``: the peak number of per-step tensors kept, ...).
    """

    name = "estimator"

    def __init__(self, model: EchoRNN, loss_fn: Any) -> None:
        if not isinstance(model, EchoRNN):
            raise TypeError(f"model must be a hel.EchoRNN, got {type(model).__name__}")
        if not callable(loss_fn):
            raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
        if getattr(loss_fn, "reduction", "mean") == "none":
            raise ValueError("loss_fn has reduction='none'; estimators need a scalar loss")
        self.model = model
        self.loss_fn = loss_fn
        self.last_stats: dict[str, Any] = {}

    # ------------------------------------------------------------------ helpers
    @property
    def cell_params(self) -> list[nn.Parameter]:
        """Parameters of the recurrent core (the ones this estimator is responsible for)."""
        return list(self.model.cell.parameters())

    def _check(self, x: torch.Tensor, y: torch.Tensor) -> None:
        half = [(n, p.dtype) for n, p in self.model.named_parameters() if p.dtype in _HALF]
        if half:
            name, dtype = half[0]
            raise TypeError(
                f"parameter {name!r} has dtype {dtype}; the estimators need float32 or float64 "
                "parameters (the echo's time reversal is not exact in half precision): call "
                "model.float() or model.double()"
            )
        self.model.check_input(x)
        if not isinstance(y, torch.Tensor):
            raise TypeError(f"y must be a torch.Tensor, got {type(y).__name__}")
        if y.shape[0] != x.shape[0]:
            raise ValueError(f"y has batch size {y.shape[0]} but x has {x.shape[0]}")
        if y.is_floating_point() and not torch.isfinite(y).all():
            raise ValueError("y contains NaN or inf")
        if self.model.readout == "sequence" and (y.dim() < 2 or y.shape[1] != x.shape[1]):
            raise ValueError(
                f"readout='sequence' needs targets shaped (B, T, ...) with T = {x.shape[1]}, "
                f"got shape {tuple(y.shape)}"
            )

    def _scalar(self, loss: torch.Tensor) -> torch.Tensor:
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise ValueError(f"loss_fn must return a scalar, got {shape}")
        return loss

    def _readout_signal(
        self, r: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Head on a pooled readout ``r``: accumulate head grads; return ``(dL/dr, loss)``."""
        r = r.detach().requires_grad_(True)
        with torch.enable_grad():
            loss = self._scalar(self.loss_fn(self.model.head(r), y))
            params = [p for p in self.model.head.parameters() if p.requires_grad]
            grads = torch.autograd.grad(loss, [r, *params], allow_unused=True)
        accumulate(
            params,
            [
                torch.zeros_like(p) if g is None else g
                for p, g in zip(params, grads[1:], strict=True)
            ],
        )
        return grads[0], loss.detach()

    def _step_signal(
        self, phi_t: torch.Tensor, y_t: torch.Tensor, T: int, accumulate_head: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-step signal of ``readout="sequence"``: ``(d l_t / d phi_t, l_t)``.

        Here ``l_t = loss_fn(head(phi_t), y_t) / T``; optionally accumulates the head's gradient.
        """
        p = phi_t.detach().requires_grad_(True)
        with torch.enable_grad():
            loss = self._scalar(self.loss_fn(self.model.head(p), y_t)) / T
            params = [q for q in self.model.head.parameters() if q.requires_grad]
            if accumulate_head:
                grads = torch.autograd.grad(loss, [p, *params], allow_unused=True)
                accumulate(
                    params,
                    [
                        torch.zeros_like(q) if g is None else g
                        for q, g in zip(params, grads[1:], strict=True)
                    ],
                )
                g_phi = grads[0]
            else:
                (g_phi,) = torch.autograd.grad(loss, [p])
        return g_phi, loss.detach()

    def _free_run(
        self, x: torch.Tensor, y: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Forward pass without a graph; returns ``(phi_T, pi_T, c, loss)`` and fills head grads.

        ``c`` is ``dL/d readout`` for ``"mean"``/``"last"`` (``None`` for ``"sequence"``).
        """
        phi, pi = self.model.initial_state(x, state)
        T = x.shape[1]
        acc = torch.zeros_like(phi)
        loss = x.new_zeros(())
        with torch.no_grad():
            for t in range(T):
                phi, pi, _ = leapfrog_step(self.model.cell, phi, pi, x[:, t])
                if self.model.readout == "mean":
                    acc += phi
                elif self.model.readout == "sequence":
                    loss = loss + self._step_signal(phi, y[:, t], T, True)[1]
        if self.model.readout == "sequence":
            return phi, pi, None, loss
        r = acc / T if self.model.readout == "mean" else phi
        c, loss = self._readout_signal(r, y)
        return phi, pi, c, loss

    def backward(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Accumulate the gradient estimate into ``p.grad`` of all model parameters.

        Args:
            x: Inputs ``(B, T, m)``.
            y: Targets (``(B, ...)``; ``(B, T, ...)`` for ``readout="sequence"``).
            state: Optional initial ``(phi0, pi0)``.

        Returns:
            The (detached) scalar loss.
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _is_auto(eps: object) -> bool:
    return isinstance(eps, str) and eps == "auto"


def check_eps(eps: object) -> float | str:
    """Validate a nudge strength: ``"auto"`` or a finite number > 0."""
    if _is_auto(eps):
        return "auto"
    if isinstance(eps, bool) or not isinstance(eps, int | float):
        raise TypeError(f"eps must be 'auto' or a number > 0, got {eps!r}")
    if not math.isfinite(eps) or eps <= 0:
        raise ValueError(f"eps must be 'auto' or a finite number > 0, got {eps}")
    return float(eps)
