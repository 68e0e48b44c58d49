"""Majority and confidence-weighted voting over extracted answers.

``a_hat = argmax_a sum_i w_i [a_i = a]`` over the paths with a parsed answer; ties go to the
answer with the larger single weight, then to the answer of the earliest path.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["majority_vote", "scores_to_weights", "weighted_vote"]


def _check_hashable(answers: Sequence[Any]) -> None:
    for i, a in enumerate(answers):
        if not isinstance(a, Hashable):
            raise TypeError(
                f"answers[{i}] is unhashable ({type(a).__name__}); extractors must return a "
                "hashable value (str, int, tuple, ...) or None"
            )


def weighted_vote(
    answers: Sequence[Hashable | None], weights: Sequence[float] | NDArray[np.float64]
) -> tuple[Hashable | None, dict[Hashable, float]]:
    """Confidence-weighted vote.

    Args:
        answers: one answer per path (``None`` = no answer; ignored).
        weights: one non-negative weight per path.

    Returns:
        ``(winner, totals)``; the winner is ``None`` when no path has an answer.

    Raises:
        ValueError: length mismatch, a negative or non-finite weight.
        TypeError: an unhashable answer.
    """
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.shape[0] != len(answers):
        raise ValueError(f"got {len(answers)} answers but {w.shape[0]} weights")
    if np.any(~np.isfinite(w)):
        raise ValueError("weights must be finite")
    if np.any(w < 0):
        raise ValueError(
            f"weights must be >= 0, got min {w.min()}; map scores with scores_to_weights"
        )
    _check_hashable(answers)
    totals: dict[Hashable, float] = {}
    best_single: dict[Hashable, float] = {}
    first: dict[Hashable, int] = {}
    for i, (a, wi) in enumerate(zip(answers, w, strict=True)):
        if a is None:
            continue
        totals[a] = totals.get(a, 0.0) + float(wi)
        best_single[a] = max(best_single.get(a, -np.inf), float(wi))
        first.setdefault(a, i)
    if not totals:
        return None, totals
    winner = max(totals, key=lambda a: (totals[a], best_single[a], -first[a]))
    return winner, totals


def majority_vote(
    answers: Sequence[Hashable | None],
) -> tuple[Hashable | None, dict[Hashable, float]]:
    """Plain majority vote (self-consistency): ``weighted_vote`` with unit weights."""
    return weighted_vote(answers, np.ones(len(answers)))


def scores_to_weights(scores: Any, beta: float = 1.0, mode: str = "exp") -> NDArray[np.float64]:
    """Map path scores (possibly negative) to non-negative vote weights.

    Args:
        scores: 1-D scores.
        beta: inverse temperature of ``mode="exp"``: ``w = exp(beta (S - max S))``.
        mode: ``"exp"``, ``"rank"`` (weights 1..n by ascending score) or ``"identity"``
            (scores used as they are; they must be >= 0, e.g. DeepConf's ``topk_mean``).

    Returns:
        float64 weights.

    Raises:
        ValueError: unknown mode, negative ``beta``.
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta}")
    if s.size == 0:
        return s
    if mode == "exp":
        return np.exp(beta * (s - s.max()))
    if mode == "rank":
        return np.argsort(np.argsort(s, kind="stable"), kind="stable").astype(np.float64) + 1.0
    if mode == "identity":
        return s
    raise ValueError(f"mode must be 'exp', 'rank' or 'identity', got {mode!r}")
