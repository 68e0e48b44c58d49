"""Event-centric caption metrics (the rewards, averaged over a benchmark)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import kendalltau

from eva_cap._validation import check_texts
from eva_cap.decompose import Decomposer, GrammarDecomposer, ParsedCaption
from eva_cap.events import EventSet
from eva_cap.matching import Matching, match_events
from eva_cap.rewards import attribution_reward, completeness_reward, sync_reward
from eva_cap.synthetic.grammar import caption_words

__all__ = [
    "attribution_accuracy",
    "evaluate_captions",
    "event_f1",
    "order_kendall_tau",
    "parse_rate",
    "sync_accuracy",
]


def _parse_all(
    captions: Sequence[str], gold: Sequence[Any], decomposer: Decomposer | None
) -> list[tuple[ParsedCaption, EventSet, Matching]]:
    captions = check_texts("captions", captions)
    if len(captions) != len(gold):
        raise ValueError(f"{len(captions)} captions but {len(gold)} gold event sets")
    if not captions:
        raise ValueError("captions is empty: no caption to score")
    dec = decomposer if decomposer is not None else GrammarDecomposer()
    out = []
    for c, g in zip(captions, gold, strict=True):
        gs = EventSet.coerce(g)
        p = dec(c)
        m = match_events(p.events, gs.events) if p.ok else Matching((), len(gs), 0)
        out.append((p, gs, m))
    return out


def _mean(xs: list[float]) -> float:
    return float(np.mean(xs)) if xs else float("nan")


def event_f1(
    captions: Sequence[str], gold: Sequence[Any], decomposer: Decomposer | None = None
) -> float:
    """Mean completeness (event F1) over captions; an unparseable caption scores 0."""
    return _mean([completeness_reward(m) for _, _, m in _parse_all(captions, gold, decomposer)])


def attribution_accuracy(
    captions: Sequence[str], gold: Sequence[Any], decomposer: Decomposer | None = None
) -> float:
    """Mean attribution reward (modality and source right, per gold event)."""
    rows = _parse_all(captions, gold, decomposer)
    return _mean([attribution_reward(p, g, m) for p, g, m in rows])


def sync_accuracy(
    captions: Sequence[str], gold: Sequence[Any], decomposer: Decomposer | None = None
) -> float:
    """Mean synchronisation reward (order and consecutive relations)."""
    rows = _parse_all(captions, gold, decomposer)
    return _mean([sync_reward(p, g, m) if p.ok else 0.0 for p, g, m in rows])


def parse_rate(captions: Sequence[str], decomposer: Decomposer | None = None) -> float:
    """Share of captions the decomposer parses.

    Raises:
        TypeError: If ``captions`` is a single str or holds a non-str.
        ValueError: If ``captions`` is empty.
    """
    captions = check_texts("captions", captions)
    if not captions:
        raise ValueError("captions is empty: no caption to score")
    dec = decomposer if decomposer is not None else GrammarDecomposer()
    return _mean([float(dec(c).ok) for c in captions])


def _tau(p: ParsedCaption, m: Matching) -> float | None:
    if len(m.pairs) < 2:
        return None
    g_idx = [g for g, _, _ in m.pairs]
    p_idx = [q for _, q, _ in m.pairs]
    t = kendalltau(g_idx, p_idx).statistic
    return None if np.isnan(t) else float(t)


def order_kendall_tau(
    captions: Sequence[str], gold: Sequence[Any], decomposer: Decomposer | None = None
) -> float:
    """Mean Kendall tau between gold onset order and caption order of matched events.

    Captions with fewer than two matched events are skipped.
    """
    taus = [_tau(p, m) for p, _, m in _parse_all(captions, gold, decomposer)]
    return _mean([t for t in taus if t is not None])


def evaluate_captions(
    captions: Sequence[str],
    gold: Sequence[Any],
    decomposer: Decomposer | None = None,
    references: Sequence[str] | None = None,
) -> dict[str, float]:
    """All metrics of a benchmark split.

    Raises:
        TypeError: If ``captions`` is a single str or holds a non-str, or a gold entry is not
            an accepted form (see :meth:`~eva_cap.EventSet.coerce`).
        ValueError: If ``captions`` is empty or its length differs from ``gold`` /
            ``references``.

    Returns:
        ``event_f1``, ``attribution``, ``sync``, ``mean_event_score`` (mean of the three),
        ``parse_rate``, ``kendall_tau``, ``words`` (mean caption length) and, with
        ``references``, ``ref_words`` and ``length_ratio`` (words / ref_words).
    """
    rows = _parse_all(captions, gold, decomposer)
    f1 = _mean([completeness_reward(m) for _, _, m in rows])
    attr = _mean([attribution_reward(p, g, m) for p, g, m in rows])
    sync = _mean([sync_reward(p, g, m) if p.ok else 0.0 for p, g, m in rows])
    taus = [_tau(p, m) for p, _, m in rows]
    out = {
        "event_f1": f1,
        "attribution": attr,
        "sync": sync,
        "mean_event_score": (f1 + attr + sync) / 3,
        "parse_rate": _mean([float(p.ok) for p, _, _ in rows]),
        "kendall_tau": _mean([t for t in taus if t is not None]),
        "words": _mean([float(len(caption_words(c))) for c in captions]),
    }
    if references is not None:
        references = check_texts("references", references)
        if len(references) != len(captions):
            raise ValueError(f"{len(captions)} captions but {len(references)} references")
        out["ref_words"] = _mean([float(len(caption_words(r))) for r in references])
        out["length_ratio"] = out["words"] / out["ref_words"]
    return out
