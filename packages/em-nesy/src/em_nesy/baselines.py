"""The baseline EM-NeSy is compared with: the exact NeSy gradient (DeepProbLog / semantic loss).

:func:`nesy_nll` differentiates ``-log p(y | x)`` through the symbolic side with autograd; EM
reaches the same gradient with an E-step that needs no gradients (see :mod:`em_nesy._em_nesy`).
"""

from __future__ import annotations

from typing import Any

import torch

from em_nesy._base import NEG_THRESHOLD, Logits, reduce_valid, warn_if_all_invalid
from em_nesy._exact import AdditionDP, Enumeration
from em_nesy.programs import MultiDigitAddition, SymbolicProgram

__all__ = ["nesy_nll"]


def nesy_nll(
    logits: Logits, y: Any, program: SymbolicProgram, reduction: str = "mean"
) -> torch.Tensor:
    """Exact-gradient NeSy baseline: differentiable ``-log p(y | x)``.

    Uses the log-space carry recursion for :class:`MultiDigitAddition` and enumeration
    (within ``Enumeration``'s default ``max_states``) for any other program. Examples with
    ``p(y | x) = 0`` are excluded, as in the E-step.

    Args:
        logits: ``(B, n, K)`` logits with gradients (or a list of ``(B, K_i)`` for
            non-addition programs with mixed domains).
        y: Labels.
        program: The symbolic program.
        reduction: ``"mean"`` over valid examples, ``"sum"`` or ``"none"``.

    Returns:
        The negative log-likelihood.

    Raises:
        ValueError: If enumeration would exceed its state limit, or on bad shapes.
    """
    if isinstance(program, MultiDigitAddition):
        if not isinstance(logits, torch.Tensor):
            raise TypeError("addition logits must be one (B, 2N, 10) tensor")
        log_lik = AdditionDP(program).log_likelihood(logits, y)
        valid = torch.from_numpy(program.label_possible(y))
    else:
        log_lik = Enumeration(program).log_likelihood(logits, y)
        valid = torch.ones_like(log_lik, dtype=torch.bool)
    valid = valid.to(log_lik.device) & (log_lik.detach() > NEG_THRESHOLD)
    warn_if_all_invalid(valid, "nesy_nll")
    return reduce_valid(-log_lik, valid, reduction)
