r"""The homeostatic loss of Echo Learning (inferred form): local, per synapse pair and step.

Echo Learning is exact when the leapfrog step is reversible (no damping) and the force
Jacobian ``J = df/dphi`` is symmetric (self-adjoint w.r.t. the momentum-flip involution)
along the trajectory. The loss penalises the violation of both conditions:

.. math::
    L_{homeo} = \operatorname{mean}_{t,b} \sum_{i,j} (J_{ij} - J_{ji})^2
    \;+\; \lambda_{rev}\,\gamma^2 ,

for :class:`~hel.cells.RateEchoCell` ``J_ij - J_ji = W_ij sigma'(phi_j) - W_ji sigma'(phi_i)``:
each term involves one synapse pair and the two neurons it connects.
"""

from __future__ import annotations

import torch

from hel.cells import ForceCell, RateEchoCell

__all__ = ["HomeostasisAccumulator", "homeostatic_loss", "homeostatic_loss_grad"]


def homeostatic_loss(cell: ForceCell, phis: torch.Tensor, lambda_rev: float = 1.0) -> torch.Tensor:
    """Homeostatic loss of ``cell`` on positions ``phis``.

    Args:
        cell: A :class:`~hel.cells.ForceCell` (uses its ``jacobian``; analytic for
            :class:`~hel.cells.RateEchoCell`).
        phis: Positions ``(T, B, n)`` (or ``(B, n)``), treated as data (no gradient flows into
            them).
        lambda_rev: Weight of the damping penalty ``gamma^2`` (when the cell has damping).

    Returns:
        Scalar loss, differentiable w.r.t. the cell's parameters.

    Raises:
        ValueError: If ``phis`` has the wrong trailing size.
    """
    if phis.shape[-1] != cell.hidden_size:
        raise ValueError(
            f"phis must end with hidden_size={cell.hidden_size}, got {tuple(phis.shape)}"
        )
    p = phis.detach().reshape(-1, cell.hidden_size)
    u = p.new_zeros(p.shape[0], cell.input_size)
    J = cell.jacobian(p, u)
    asym = J - J.transpose(-1, -2)
    loss = (asym * asym).sum((-1, -2)).mean()
    gamma = cell.damping
    if gamma is not None:
        loss = loss + lambda_rev * (gamma * gamma).sum()
    return loss


def homeostatic_loss_grad(
    cell: ForceCell, phi: torch.Tensor, lambda_rev: float = 1.0
) -> tuple[float, list[torch.Tensor]]:
    """Value and parameter gradient of :func:`homeostatic_loss` at positions ``phi`` ``(B, n)``.

    Analytic for an undamped :class:`~hel.cells.RateEchoCell`
    (``dL/dW_ij = mean_b 4 (J_ij - J_ji) sigma'(phi_j)``), one-step autograd otherwise.
    """
    params = list(cell.parameters())
    if isinstance(cell, RateEchoCell) and cell.damping is None:
        with torch.no_grad():
            d = cell.dsigma(phi, cell.sigma(phi))
            M = cell.W.unsqueeze(0) * d.unsqueeze(1)
            asym = M - M.transpose(1, 2)
            value = float((asym * asym).sum((1, 2)).mean())
            g_W = 4.0 * (asym * d.unsqueeze(1)).mean(0)
        return value, [g_W if p is cell.W else torch.zeros_like(p) for p in params]
    with torch.enable_grad():
        term = homeostatic_loss(cell, phi, lambda_rev)
        grads = torch.autograd.grad(term, params, allow_unused=True)
    return float(term.detach()), [
        torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)
    ]


class HomeostasisAccumulator:
    """Online (constant-memory) accumulator of ``homeostatic_loss`` gradients, step by step.

    Example:
        >>> import torch
        >>> from hel import HomeostasisAccumulator, RateEchoCell
        >>> cell = RateEchoCell(1, 4)
        >>> acc = HomeostasisAccumulator(cell)
        >>> acc.update(torch.randn(2, 4))
        >>> grads = acc.grads()
    """

    def __init__(self, cell: ForceCell, lambda_rev: float = 1.0) -> None:
        self.cell = cell
        self.lambda_rev = lambda_rev
        self.steps = 0
        self.value = 0.0
        self._grads: list[torch.Tensor] | None = None

    def update(self, phi: torch.Tensor) -> None:
        """Add one step's positions ``(B, n)``."""
        term, grads = homeostatic_loss_grad(self.cell, phi, self.lambda_rev)
        if self._grads is None:
            self._grads = grads
        else:
            for a, g in zip(self._grads, grads, strict=True):
                a.add_(g)
        self.value += float(term)
        self.steps += 1

    def grads(self) -> list[torch.Tensor]:
        """Gradient of the time-averaged loss w.r.t. every cell parameter."""
        if self._grads is None:
            raise ValueError("no step was added")
        return [g / self.steps for g in self._grads]
