"""Slow, obviously correct references of the spec's rules, written from the spec's text alone.

Everything works on plain lists: ``C[a][j]`` competence and ``N[a][j]`` counts of agent ``a``
(row order = population order) on niche ``j``; a niche an agent never answered (``N == 0``)
counts at the initial competence 0.5. Nothing here imports the package.
"""

from __future__ import annotations

import math
import statistics

INITIAL = 0.5


def ewma(c0: float, outcomes: list[float], lam: float) -> float:
    c = c0
    for s in outcomes:
        c = (1 - lam) * c + lam * s
    return c


def ucb(c: float, n: int, t: int, beta: float) -> float:
    return c + beta * math.sqrt(math.log(1 + t) / (1 + n))


def value(quality: float, t: int, t_used: int, tau: float) -> float:
    return quality * math.exp(-(t - t_used) / tau)


def comp(C, N, a, j):
    """c[a, j] with the 0.5 prior for a niche agent ``a`` never answered."""
    return C[a][j] if N[a][j] >= 1 else INITIAL


def cos(u, v):
    nu = math.sqrt(sum(x * x for x in u))
    nv = math.sqrt(sum(x * x for x in v))
    if nu == 0 or nv == 0:
        return 0.0
    return sum(x * y for x, y in zip(u, v, strict=True)) / (nu * nv)


def top_niche(C, N, a):
    """First niche of highest competence among those agent ``a`` answered (None if none)."""
    top = None
    for j in range(len(C[a])):
        if N[a][j] >= 1 and (top is None or C[a][j] > C[a][top]):
            top = j
    return top


# ---- team assembly (spec step 1) ---------------------------------------------------------
def anchor_ref(C, N, k, t, beta):
    """Index of argmax_a c[a,k] + beta sqrt(log(1+t)/(1+n[a,k])) (None on an exact tie)."""
    s = [ucb(comp(C, N, a, k), N[a][k], t, beta) for a in range(len(C))]
    best = max(s)
    top = [a for a in range(len(C)) if s[a] == best]
    return top[0] if len(top) == 1 else None


def supplement_ref(C, N, k, anchor, profiles, gamma):
    """argmax_{a != anchor} c[a,k] - gamma cos(prof_a, prof_anchor) (None on an exact tie)."""
    s = {
        a: comp(C, N, a, k) - gamma * cos(profiles[a], profiles[anchor])
        for a in range(len(C))
        if a != anchor
    }
    best = max(s.values())
    top = [a for a, v in s.items() if v == best]
    return top[0] if len(top) == 1 else None


def scout_pool_ref(N, k, taken):
    """Agents not in ``taken`` with n[a,k] <= the pool median of n[., k]."""
    med = statistics.median(N[a][k] for a in range(len(N)))
    pool = {a for a in range(len(N)) if a not in taken and N[a][k] <= med}
    return pool or {a for a in range(len(N)) if a not in taken}


# ---- CoDream routing (spec step 5, phase v) -----------------------------------------------
def route_brute_force(C, N, team, k, guard):
    """(donors, recipients) of held knowledge on niche k, as sets of row indices."""
    seen = [comp(C, N, a, k) for a in range(len(C)) if N[a][k] >= 1]
    if not seen:
        return set(), set()
    med = statistics.median(seen)
    donors = {a for a in team if comp(C, N, a, k) >= med}
    rec = {a for a in team if comp(C, N, a, k) < med and not guarded_ref(C, N, a, k, guard)}
    return donors, rec


def guarded_ref(C, N, a, k, guard):
    top = top_niche(C, N, a)
    return top is not None and top != k and C[a][top] >= guard


def cold_start_ref(C, N, team, k):
    """No alive agent answered k, no member reaches the median, or no answered agent is below it."""
    seen = [a for a in range(len(C)) if N[a][k] >= 1]
    if not seen:
        return True
    med = statistics.median(comp(C, N, a, k) for a in seen)
    no_donor = not any(comp(C, N, a, k) >= med for a in team)
    no_weak = not any(comp(C, N, a, k) < med for a in seen)
    return no_donor or no_weak


def targets_ref(C, N, team, k, holder, guard, dissenters=None, active=(), scope="team"):
    """Who receives one insight under asymmetric routing, as a set of row indices.

    ``holder``: row index of the member whose archive the insight restates (None: a lesson
    nobody held). ``dissenters``: the only possible recipients after a success with
    disagreement (None: a failure).
    """
    guarded = {a for a in range(len(C)) if guarded_ref(C, N, a, k, guard)}
    if cold_start_ref(C, N, team, k):
        out = set(team)
    else:
        seen = [comp(C, N, a, k) for a in range(len(C)) if N[a][k] >= 1]
        med = statistics.median(seen)
        donors = {a for a in team if comp(C, N, a, k) >= med}
        pool = set(team)
        if scope == "active":
            pool |= set(active)
        if holder is not None and holder in donors:
            out = {a for a in pool if comp(C, N, a, k) < med} - guarded
        else:
            out = set(team) - guarded
    if dissenters is not None:
        out = (out & set(dissenters)) - guarded
    return out - {holder}


# ---- lifecycle (spec step 6) --------------------------------------------------------------
def quantile_ref(xs, q):
    """Linear-interpolation quantile (numpy's default), by hand."""
    s = sorted(xs)
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def prune_ref(C, N, ages, q, min_age, n_min):
    """Rows pruned: max_k c below the q-quantile and age >= min_age, lowest first, >= n_min kept."""
    best = [max(comp(C, N, a, j) for j in range(len(C[a]))) for a in range(len(C))]
    cut = quantile_ref(best, q)
    elig = sorted(
        (a for a in range(len(C)) if best[a] < cut and ages[a] >= min_age),
        key=lambda a: (best[a], a),
    )
    return elig[: max(0, len(C) - n_min)]


def tops_ref(C, N):
    """Rows that top some niche (first maximum among agents that answered it)."""
    out = set()
    for j in range(len(C[0])):
        seen = [a for a in range(len(C)) if N[a][j] >= 1]
        if seen:
            out.add(max(seen, key=lambda a: (C[a][j], -a)))
    return out


def merge_ref(C, N, profiles, merge_cos, n_min):
    """The first pair (population order) of non-top agents with profile cosine >= merge_cos."""
    if len(C) <= n_min:
        return None
    tops = tops_ref(C, N)
    cand = [a for a in range(len(C)) if a not in tops and sum(profiles[a]) > 0]
    for i, a in enumerate(cand):
        for b in cand[i + 1 :]:
            if cos(profiles[a], profiles[b]) >= merge_cos:
                return (a, b)
    return None


def fork_ref(C, N, recent_share, fork_c, n_max, cooling=()):
    """(parent row, niche) of the fork with the largest positive share deficit, or None.

    Fork when the top agent of k has c >= fork_c and d_k > (#agents with c[., k] >= fork_c)/|P|.
    """
    if len(C) >= n_max:
        return None
    best, pick = 0.0, None
    for j in range(len(C[0])):
        seen = [a for a in range(len(C)) if N[a][j] >= 1]
        if not seen or j in cooling:
            continue
        top = max(seen, key=lambda a: (C[a][j], -a))
        n_spec = sum(1 for a in seen if C[a][j] >= fork_c)
        gap = recent_share[j] - n_spec / len(C)
        if C[top][j] >= fork_c and gap > best:
            best, pick = gap, (top, j)
    return pick


def seed_needs_ref(C, N, cover_c, n_min, n_max):
    """Seeds: one blank per missing agent below n_min, then one per uncovered niche, <= n_max.

    A niche is covered by an agent that answered it with c >= cover_c (the 0.5 prior is no
    evidence of competence).
    """
    uncovered = [
        j
        for j in range(len(C[0]))
        if not any(N[a][j] >= 1 and C[a][j] >= cover_c for a in range(len(C)))
    ]
    needs = [None] * max(0, n_min - len(C)) + uncovered
    return needs[: max(0, n_max - len(C))]
