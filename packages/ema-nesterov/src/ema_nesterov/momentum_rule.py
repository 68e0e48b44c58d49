r"""A lookahead size for a base optimizer that has momentum of its own.

Derivation (README, "Choosing beta"). On a slow direction of curvature :math:`\lambda`
(:math:`h = \text{lr}\,\lambda \ll 1`) a heavy-ball base ``SGD(momentum=mu, dampening=tau)``
moves like plain gradient descent with the step multiplied by its steady-state gain
:math:`G = (1-\tau)/(1-\mu)`. The best lookahead over plain gradient descent at step
:math:`h` is :math:`1 - \beta^* \approx 2\sqrt{h/(1-\gamma)}` (Nesterov's :math:`1 - 2\sqrt h`
at ``gamma = 0``; the EMA widens the constant), so over the momentum base it is the one at
:math:`G h`: :math:`1 - \beta = (1 - \beta_0)\sqrt{G}`, with :math:`\beta_0` the lookahead one
would use over the same base without momentum. Bases whose step is normalised or whose
momentum is an average with unit gain (Adam/AdamW/NAdam, Muon, SOAP) have ``G = 1``.
"""

from __future__ import annotations

import math

import torch

#: The lookahead over a momentum-free base the rule starts from (Nesterov's classic 0.9,
#: also ``NesterovLookahead``'s default).
REFERENCE_BETA = 0.9


def momentum_gain(base_optimizer: torch.optim.Optimizer) -> float:
    """Steady-state step gain of ``base_optimizer``'s momentum (first parameter group).

    ``SGD``: ``(1 - dampening) / (1 - momentum)``; every other optimizer: 1 (Adam-style
    momentum is an average, Muon/SOAP normalise the step).

    Raises:
        ValueError: If an SGD momentum is not in ``[0, 1)``.
    """
    if not isinstance(base_optimizer, torch.optim.SGD):
        return 1.0
    group = base_optimizer.param_groups[0]
    mu, tau = float(group.get("momentum", 0.0)), float(group.get("dampening", 0.0))
    if not 0.0 <= mu < 1.0:
        raise ValueError(f"SGD momentum must be in [0, 1) for the rule, got {mu}")
    return (1.0 - tau) / (1.0 - mu) if mu > 0 else 1.0


def momentum_matched_beta(
    base_optimizer: torch.optim.Optimizer, reference_beta: float = REFERENCE_BETA
) -> float:
    r"""``beta = 1 - (1 - reference_beta) * sqrt(G)``, clipped at 0 (module docstring).

    Args:
        base_optimizer: The optimizer to be wrapped.
        reference_beta: The lookahead for the same base without momentum, in ``[0, 1)``.

    Returns:
        The lookahead size for :class:`ema_nesterov.EMANesterov` (or ``NesterovLookahead``).

    Raises:
        ValueError: If ``reference_beta`` is not in ``[0, 1)``.

    Example:
        >>> import torch
        >>> w = torch.nn.Parameter(torch.ones(2))
        >>> round(momentum_matched_beta(torch.optim.SGD([w], lr=0.1, momentum=0.9)), 3)
        0.684
    """
    if not (0.0 <= reference_beta < 1.0):
        raise ValueError(f"reference_beta must be in [0, 1), got {reference_beta}")
    return max(0.0, 1.0 - (1.0 - reference_beta) * math.sqrt(momentum_gain(base_optimizer)))
