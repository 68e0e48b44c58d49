"""The three event-centric rewards, the format gate and TRL-ready reward callables.

Every reward is in [0, 1] and recall-normalised by the number n of ground-truth events, so
that a short caption with one safe clause cannot score high (anti-gaming). The formulas are
**inferred** from the EVA-Cap abstract (the paper's own are not public).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from eva_cap._validation import check_texts, check_weights
from eva_cap.decompose import Decomposer, ParsedCaption
from eva_cap.events import EventSet, Relation
from eva_cap.matching import Matching, Similarity, exact_similarity, match_events, normalize

__all__ = [
    "AGGREGATIONS",
    "REWARD_NAMES",
    "SYNC_MODES",
    "EventRewards",
    "attribution_reward",
    "completeness_reward",
    "format_reward",
    "sync_reward",
    "trl_reward_funcs",
]

REWARD_NAMES = ("completeness", "attribution", "sync")
AGGREGATIONS = ("gated", "additive")
SYNC_MODES = ("connectives", "timestamps")


def completeness_reward(matching: Matching) -> float:
    """Event F1 ``2PR/(P+R)`` with ``P = sum sim / m``, ``R = sum sim / n`` (0 if m = 0)."""
    if matching.n_pred == 0 or matching.n_gold == 0 or matching.total == 0:
        return 0.0
    p, r = matching.total / matching.n_pred, matching.total / matching.n_gold
    return 2 * p * r / (p + r)


def attribution_reward(
    pred: ParsedCaption | Sequence[Any], gold: Sequence[Any], matching: Matching
) -> float:
    """``(1/n) sum_M (0.5 [modality match] + 0.5 [subject (sound source) match])``."""
    pe = pred.events if isinstance(pred, ParsedCaption) else pred
    if matching.n_gold == 0:
        return 0.0
    s = sum(
        0.5 * (pe[p].modality == gold[g].modality)
        + 0.5 * (normalize(pe[p].subject) == normalize(gold[g].subject))
        for g, p, _ in matching.pairs
    )
    return float(s) / matching.n_gold


def _iou(a: Any, b: Any) -> float:
    inter = max(0.0, min(a.t_end, b.t_end) - max(a.t_start, b.t_start))
    union = max(a.t_end, b.t_end) - min(a.t_start, b.t_start)
    return inter / union if union > 0 else float(a.t_start == b.t_start)


def sync_reward(
    pred: ParsedCaption, gold: EventSet, matching: Matching, mode: str = "connectives"
) -> float:
    """``(O + J) / 2`` over the onset-sorted gold events (``R_comp`` when n < 2).

    ``O``: share of the n(n-1)/2 gold pairs (a < b) that are both matched with a's prediction
    before b's (or equal gold onsets). ``J``: share of the n - 1 consecutive gold pairs matched
    to consecutive predictions whose connective equals the gold relation; with
    ``mode="timestamps"`` J is ``(1/n) sum_M IoU`` of the matched intervals instead.
    """
    if mode not in SYNC_MODES:
        raise ValueError(f"mode must be one of {SYNC_MODES}, got {mode!r}")
    n = len(gold)
    if n < 2:
        return completeness_reward(matching)
    pos = matching.pred_of()
    onsets = [e.t_start for e in gold] if gold.timed else None
    ordered = 0
    for a in range(n):
        for b in range(a + 1, n):
            if a in pos and b in pos:
                tie = onsets is not None and onsets[a] == onsets[b]
                ordered += pos[a] < pos[b] or tie
    o = ordered / (n * (n - 1) / 2)
    if mode == "timestamps":
        pe = pred.events
        if not (gold.timed and all(pe[p].has_time for p in pos.values())):
            raise ValueError("sync mode 'timestamps' needs timestamps on gold and predictions")
        j = sum(_iou(gold[g], pe[p]) for g, p in pos.items()) / n
    else:
        good = 0
        for a in range(n - 1):
            if a in pos and a + 1 in pos and pos[a + 1] == pos[a] + 1:
                good += pred.relations[pos[a]] is Relation(gold.relations[a])
        j = good / (n - 1)
    return (o + j) / 2


def format_reward(parsed: ParsedCaption) -> float:
    """1 if the decomposer parsed the caption, else 0."""
    return float(bool(parsed.ok))


class EventRewards:
    """All event rewards of a batch of captions against their ground-truth events.

    ``total = R_fmt * (w_c R_comp + w_a R_attr + w_s R_sync)`` (``aggregation="gated"``,
    default: an unparseable caption gets 0 and no parse bonus can be farmed) or
    ``R_fmt + w_c R_comp + w_a R_attr + w_s R_sync`` (``"additive"``, the prototype's
    failure mode, kept as an option).

    Args:
        decomposer: Caption -> :class:`ParsedCaption`.
        weights: ``(w_c, w_a, w_s)``: finite, ``>= 0``, not all zero.
        aggregation: ``"gated"`` or ``"additive"``.
        similarity: Event similarity for matching.
        sync_mode: ``"connectives"`` or ``"timestamps"``.

    Raises:
        ValueError: On weights of the wrong length, negative, NaN, infinite or all zero, or an
            unknown aggregation / sync mode.
        TypeError: If ``decomposer`` or ``similarity`` is not callable or a weight is not a
            number.
    """

    def __init__(
        self,
        decomposer: Decomposer,
        weights: Sequence[float] = (1.0, 1.0, 1.0),
        aggregation: str = "gated",
        similarity: Similarity = exact_similarity,
        sync_mode: str = "connectives",
    ) -> None:
        if not callable(decomposer):
            raise TypeError(f"decomposer must be callable, got {type(decomposer).__name__}")
        if not callable(similarity):
            raise TypeError(f"similarity must be callable, got {type(similarity).__name__}")
        if isinstance(weights, (list, tuple)) and len(weights) != len(REWARD_NAMES):
            raise ValueError(f"weights must have {len(REWARD_NAMES)} entries {REWARD_NAMES}, "
                             f"got {len(weights)}")  # fmt: skip
        weights = check_weights("weights", weights, len(REWARD_NAMES))
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
        if sync_mode not in SYNC_MODES:
            raise ValueError(f"sync_mode must be one of {SYNC_MODES}, got {sync_mode!r}")
        self.decomposer = decomposer
        self.weights = tuple(float(w) for w in weights)
        self.aggregation = aggregation
        self.similarity = similarity
        self.sync_mode = sync_mode

    def score(self, caption: str, gold: Any) -> dict[str, float]:
        """The rewards of one caption: completeness, attribution, sync, format, total.

        Raises:
            TypeError: If ``caption`` is not a str (an empty str is a valid, unparseable
                caption) or ``gold`` is not an accepted form (see :meth:`EventSet.coerce`).
            ValueError: If ``gold`` is JSON text that does not parse.
        """
        if not isinstance(caption, str):
            raise TypeError(f"caption must be a str, got {type(caption).__name__}")
        gold = EventSet.coerce(gold)
        parsed = self.decomposer(caption)
        if not parsed.ok:
            r = dict.fromkeys((*REWARD_NAMES, "format"), 0.0)
        else:
            m = match_events(parsed.events, gold.events, self.similarity)
            r = {
                "completeness": completeness_reward(m),
                "attribution": attribution_reward(parsed, gold, m),
                "sync": sync_reward(parsed, gold, m, self.sync_mode),
                "format": 1.0,
            }
        weighted = sum(w * r[k] for w, k in zip(self.weights, REWARD_NAMES, strict=True))
        gated = self.aggregation == "gated"
        r["total"] = r["format"] * weighted if gated else r["format"] + weighted
        return r

    def __call__(self, captions: Sequence[str], golds: Sequence[Any]) -> dict[str, np.ndarray]:
        """Per-reward and total arrays, one entry per caption.

        Raises:
            TypeError: If ``captions`` is a single str or holds a non-str.
            ValueError: If ``captions`` and ``golds`` differ in length.
        """
        captions = check_texts("captions", captions)
        if len(captions) != len(golds):
            raise ValueError(f"{len(captions)} captions but {len(golds)} gold event sets")
        rows = [self.score(c, g) for c, g in zip(captions, golds, strict=True)]
        keys = (*REWARD_NAMES, "format", "total")
        return {k: np.array([r[k] for r in rows], dtype=float) for k in keys}


def _text(completion: Any) -> str:
    """A completion as text: a string, or TRL's conversational ``[{"role", "content"}]``."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return str(completion)


class _RewardFunc:
    """A picklable TRL reward callable: ``f(prompts, completions, gold_events, **kw)``."""

    def __init__(self, rewards: EventRewards, key: str) -> None:
        self.rewards, self.key = rewards, key
        self.__name__ = f"eva_{key}"

    def __call__(
        self,
        prompts: Any = None,
        completions: Sequence[Any] = (),
        gold_events: Sequence[Any] | None = None,
        **kwargs: Any,
    ) -> list[float | None]:
        if gold_events is None:
            return [None] * len(completions)
        out: list[float | None] = []
        for c, g in zip(completions, gold_events, strict=True):
            if g is None or (isinstance(g, str) and not g.strip()):
                out.append(None)
            else:
                out.append(self.rewards.score(_text(c), g)[self.key])
        return out


def trl_reward_funcs(
    decomposer: Decomposer,
    components: bool = False,
    *,
    weights: Sequence[float] = (1.0, 1.0, 1.0),
    aggregation: str = "gated",
) -> list[Callable[..., list[float | None]]]:
    """Reward callables for ``trl.GRPOTrainer(reward_funcs=...)``.

    Each is ``f(prompts, completions, gold_events, **kwargs) -> list[float | None]`` (extra
    TRL keywords such as ``completion_ids`` or ``trainer_state`` are ignored; ``None`` for rows
    without gold events). ``gold_events`` is the dataset column: JSON list of events per row.

    Args:
        decomposer: Caption -> :class:`ParsedCaption` (picklable for multi-process use).
        components: ``False``: ``[gated total]``; ``True``: ``[comp, attr, sync, format]``.
        weights: Reward weights inside the total.
        aggregation: ``"gated"`` or ``"additive"``.
    """
    rewards = EventRewards(decomposer, weights, aggregation)
    keys = [*REWARD_NAMES, "format"] if components else ["total"]
    return [_RewardFunc(rewards, k) for k in keys]
