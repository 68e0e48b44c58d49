"""Metrics of a run: stable specialists, specialization index, coverage, window accuracy, cost."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from evochamber.population import Population


def stable_specialists(
    steps: Sequence[Mapping[str, Any]],
    window: int = 300,
    share: float = 0.5,
    min_tasks: int = 10,
) -> dict[str, str]:
    """``{niche: agent}`` for the niches whose top anchor anchors >= ``share`` of them.

    Over the last ``window`` steps; a niche with fewer than ``min_tasks`` tasks there has no
    specialist. Ties between two agents at the top share: the lower agent id. The spec's count
    is ``len(set(result.values()))`` (distinct agents, 0..K): :func:`n_stable_specialists`.
    """
    by_niche: dict[str, list[str]] = defaultdict(list)
    for s in steps[-window:] if window else steps:
        by_niche[s["niche"]].append(s["anchor"])
    out = {}
    for k, anchors in by_niche.items():
        if len(anchors) < min_tasks:
            continue
        counts = Counter(anchors)
        top = max(counts.values())
        if top / len(anchors) >= share:
            out[k] = min(a for a, c in counts.items() if c == top)
    return out


def n_stable_specialists(steps: Sequence[Mapping[str, Any]], **kw: Any) -> int:
    """Number of distinct stable specialists (0..K)."""
    return len(set(stable_specialists(steps, **kw).values()))


def specialization_index(profiles: Iterable[Sequence[float]]) -> float:
    """Mean over agents of ``1 - H(p) / log K`` of their niche profiles (empty ones skipped).

    0 for uniform profiles, 1 for one-niche profiles.
    """
    vals = []
    for prof in profiles:
        p = np.asarray(prof, float)
        if p.sum() <= 0 or len(p) < 2:
            continue
        p = p / p.sum()
        nz = p[p > 0]
        vals.append(1.0 + float(nz @ np.log(nz)) / math.log(len(p)))
    return float(np.mean(vals)) if vals else math.nan


def population_specialization(population: Population) -> float:
    """:func:`specialization_index` of the alive agents' archive profiles."""
    return specialization_index(a.archive.profile(population.niches) for a in population)


def niche_coverage(population: Population, threshold: float = 0.5) -> float:
    """Share of niches with an alive agent that answered them at competence >= ``threshold``.

    Starts at 0 (no agent has answered anything: the 0.5 prior covers nothing), the criterion
    of the lifecycle's seed operator (:meth:`~evochamber.agent.Agent.covers`).
    """
    if not population.niches:
        return math.nan
    covered = [any(a.covers(k, threshold) for a in population) for k in population.niches]
    return float(np.mean(covered))


def window_accuracy(successes: Sequence[bool | None], window: int = 300) -> float:
    """Accuracy of the checked outcomes among the last ``window``."""
    known = [s for s in successes[-window:] if s is not None]
    return float(np.mean(known)) if known else math.nan


def cost_summary(steps: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Model calls and tokens per task, CoDream's share of the calls, CoDream rate."""
    n = max(1, len(steps))
    calls = sum(s["calls"] for s in steps)
    cd = sum(s["codream_calls"] for s in steps)
    return {
        "calls_per_task": calls / n,
        "codream_calls_per_task": cd / n,
        "tokens_per_task": sum(s["tokens"] for s in steps) / n,
        "codream_rate": sum(bool(s["codream"]) for s in steps) / n,
    }
