"""Slow, obviously correct references: the routing rule, the archive value, the EWMA."""

from __future__ import annotations

import math
import statistics


def ewma(c0: float, outcomes: list[float], lam: float) -> float:
    c = c0
    for s in outcomes:
        c = (1 - lam) * c + lam * s
    return c


def ucb(c: float, n: int, t: int, beta: float) -> float:
    return c + beta * math.sqrt(math.log(1 + t) / (1 + n))


def route_brute_force(C, N, team, k, guard):
    """Recipients of held knowledge on niche k, from a competence matrix C and counts N.

    C[a][j], N[a][j]: lists of lists; team: row indices. Returns (donors, recipients) as sets.
    A niche an agent never answered (N = 0) counts at the initial competence 0.5.
    """
    C = [[C[a][j] if N[a][j] >= 1 else 0.5 for j in range(len(C[a]))] for a in range(len(C))]
    seen = [C[a][k] for a in range(len(C)) if N[a][k] >= 1]
    if not seen:
        return set(), set()
    med = statistics.median(seen)
    donors = {a for a in team if C[a][k] >= med}
    rec = set()
    for a in team:
        answered = [j for j in range(len(C[a])) if N[a][j] >= 1]
        top = None
        for j in answered:  # first maximum among answered niches, in niche order
            if top is None or C[a][j] > C[a][top]:
                top = j
        guarded = top is not None and top != k and C[a][top] >= guard
        if C[a][k] < med and not guarded:
            rec.add(a)
    return donors, rec


def value(quality: float, t: int, t_used: int, tau: float) -> float:
    return quality * math.exp(-(t - t_used) / tau)
