"""Hungarian matching of predicted to ground-truth events."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from eva_cap.events import AtomicEvent

__all__ = ["Matching", "exact_similarity", "match_events", "normalize"]

Similarity = Callable[[AtomicEvent, AtomicEvent], float]

_ARTICLES = ("the ", "a ", "an ")


def normalize(text: str) -> str:
    """Lower case, collapsed whitespace, leading article dropped ("The Dog" -> "dog")."""
    t = " ".join(str(text).lower().split())
    for a in _ARTICLES:
        if t.startswith(a):
            return t[len(a) :]
    return t


def exact_similarity(pred: AtomicEvent, gold: AtomicEvent) -> float:
    """``[action match] * (0.5 + 0.5 [subject match])`` after :func:`normalize`."""
    if normalize(pred.action) != normalize(gold.action):
        return 0.0
    return 0.5 + 0.5 * float(normalize(pred.subject) == normalize(gold.subject))


@dataclass(frozen=True)
class Matching:
    """A one-to-one matching: ``pairs[k] = (gold_index, pred_index, sim)`` with ``sim > 0``."""

    pairs: tuple[tuple[int, int, float], ...]
    n_gold: int
    n_pred: int

    @property
    def total(self) -> float:
        """Sum of the matched similarities."""
        return float(sum(s for _, _, s in self.pairs))

    def pred_of(self) -> dict[int, int]:
        """``{gold_index: pred_index}`` for the matched gold events."""
        return {g: p for g, p, _ in self.pairs}


def match_events(
    pred: Sequence[AtomicEvent],
    gold: Sequence[AtomicEvent],
    similarity: Similarity = exact_similarity,
) -> Matching:
    """Maximum-similarity one-to-one matching (``scipy.optimize.linear_sum_assignment``).

    Pairs whose similarity is 0 are left unmatched.

    Raises:
        TypeError: If an entry of ``pred`` or ``gold`` is not an :class:`AtomicEvent`.
        ValueError: If ``similarity`` returns a NaN, infinite or negative value.
    """
    for name, seq in (("pred", pred), ("gold", gold)):
        for i, e in enumerate(seq):
            if not isinstance(e, AtomicEvent):
                raise TypeError(f"{name}[{i}] must be an AtomicEvent, got {type(e).__name__}")
    n, m = len(gold), len(pred)
    if n == 0 or m == 0:
        return Matching((), n, m)
    sim = np.array([[similarity(p, g) for p in pred] for g in gold], dtype=float)
    if not np.isfinite(sim).all() or (sim < 0).any():
        raise ValueError("similarity must return finite values >= 0, got NaN/inf/negative")
    rows, cols = linear_sum_assignment(sim, maximize=True)
    pairs = tuple(
        (int(g), int(p), float(sim[g, p])) for g, p in zip(rows, cols, strict=True) if sim[g, p] > 0
    )
    return Matching(pairs, n, m)
