"""Population-level operators: prune, merge, fork and seed, every ``period`` tasks.

Thresholds and several details are inferred (the paper's code was not retrievable).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from evochamber.agent import INITIAL_COMPETENCE, Agent
from evochamber.memory import MemoryArchive
from evochamber.population import Population
from evochamber.team import cosine
from evochamber.types import Insight
from methodkit.checks import check_int, check_real


@dataclass
class LifecycleEvent:
    """One operator application: ``kind`` in prune / merge / fork / seed."""

    kind: str
    t: int
    agents: list[str]
    result: str | None = None
    niche: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)


@dataclass
class Lifecycle:
    """Prune, merge, fork, seed under N_min <= |P| <= N_max.

    * prune: max_k c[a,k] below the pool's ``prune_q`` quantile and age >= ``min_age``
      (never below N_min);
    * merge: two agents that top no niche, with archive-profile cosine >= ``merge_cos`` ->
      one agent with the value-ranked union of archives (<= C) and per-niche max competence;
    * fork: the top agent of niche k forks when c >= ``fork_c`` and the niche share d_k (over
      the last ``period`` tasks) exceeds (#agents with c[., k] >= fork_c) / |P|; the child
      copies the archive, its competence is halved toward 0.5, counts reset, lineage kept;
      one fork per step (the niche with the largest deficit), bounded by N_max;
    * seed: a blank agent (``prime`` with niche k's best insights) when |P| < N_min or
      niche k has no agent that answered it with c >= ``cover_c`` (:meth:`Agent.covers`: the
      0.5 prior of an unanswered niche does not count).

    Each operator can be switched off (ablations).
    """

    period: int = 50
    prune_q: float = 0.25
    merge_cos: float = 0.9
    fork_c: float = 0.7
    cover_c: float = 0.5
    min_age: int = 100
    prune: bool = True
    merge: bool = True
    fork: bool = True
    seed: bool = True
    prime: bool = True
    spec_c: float = 0.7
    fork_cooldown: int = 0
    recent: list[str] = field(default_factory=list)
    last_fork: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_int("period", self.period, 1)
        check_int("min_age", self.min_age, 0)
        check_int("fork_cooldown", self.fork_cooldown, 0)
        for name in ("prune_q", "merge_cos", "fork_c", "cover_c", "spec_c"):
            check_real(name, getattr(self, name), 0.0, 1.0)

    def observe(self, niche: str) -> None:
        """Record the niche of one task (for d_k)."""
        self.recent.append(niche)
        del self.recent[: -self.period]

    def due(self, t: int) -> bool:
        """Whether the lifecycle runs after step ``t``."""
        return (t + 1) % self.period == 0

    def step(self, population: Population, t: int) -> list[LifecycleEvent]:
        """Apply the enabled operators in the order prune, merge, fork, seed."""
        events: list[LifecycleEvent] = []
        if self.prune:
            events += self._prune(population, t)
        if self.merge:
            events += self._merge(population, t)
        if self.fork:
            events += self._fork(population, t)
        if self.seed:
            events += self._seed(population, t)
        return events

    def tops(self, population: Population) -> set[str]:
        """Ids of the agents that top some niche (highest c among agents that answered it)."""
        out = set()
        for k in population.niches:
            seen = [a for a in population.agents if a.n(k) >= 1]
            if seen:
                out.add(max(seen, key=lambda a: a.c(k)).agent_id)
        return out

    def _prune(self, population: Population, t: int) -> list[LifecycleEvent]:
        if not population.niches:
            return []
        best = {a.agent_id: max(a.c(k) for k in population.niches) for a in population}
        cut = float(np.quantile(list(best.values()), self.prune_q))
        events = []
        for a in sorted(population.agents, key=lambda a: (best[a.agent_id], a.agent_id)):
            if len(population) <= population.n_min:
                break
            if best[a.agent_id] < cut and t - a.born_t >= self.min_age:
                population.retire(a)
                events.append(LifecycleEvent("prune", t, [a.agent_id]))
        return events

    def _merge(self, population: Population, t: int) -> list[LifecycleEvent]:
        tops = self.tops(population)
        cand = [a for a in population.agents if a.agent_id not in tops and len(a.archive)]
        for i, a in enumerate(cand):
            for b in cand[i + 1 :]:
                pa = a.archive.profile(population.niches)
                pb = b.archive.profile(population.niches)
                if len(population) > population.n_min and cosine(pa, pb) >= self.merge_cos:
                    child = merge_agents(a, b, population.new_id(), t)
                    population.replace([a, b], child)
                    return [LifecycleEvent("merge", t, [a.agent_id, b.agent_id], child.agent_id)]
        return []

    def _fork(self, population: Population, t: int) -> list[LifecycleEvent]:
        if len(population) >= population.n_max or not self.recent:
            return []
        best_gap, pick = 0.0, None
        for k in population.niches:
            seen = [a for a in population.agents if a.n(k) >= 1]
            if not seen:
                continue
            top = max(seen, key=lambda a: a.c(k))
            n_spec = sum(a.n(k) >= 1 and a.c(k) >= self.spec_c for a in population.agents)
            gap = self.recent.count(k) / len(self.recent) - n_spec / len(population)
            cooling = t - self.last_fork.get(k, -(10**9)) < self.fork_cooldown
            if top.c(k) >= self.fork_c and gap > best_gap and not cooling:
                best_gap, pick = gap, (top, k)
        if pick is None:
            return []
        parent, k = pick
        child = fork_agent(parent, population.new_id(), t)
        self.last_fork[k] = t
        population.add(child)
        return [LifecycleEvent("fork", t, [parent.agent_id], child.agent_id, k)]

    def _seed(self, population: Population, t: int) -> list[LifecycleEvent]:
        events = []
        uncovered = [
            k for k in population.niches if not any(a.covers(k, self.cover_c) for a in population)
        ]
        needs = [None] * max(0, population.n_min - len(population)) + uncovered
        cap = population.agents[0].archive.capacity if population.agents else 8
        tau = population.agents[0].archive.tau if population.agents else 300.0
        for k in needs:
            if len(population) >= population.n_max:
                break
            agent = Agent(population.new_id(), archive=MemoryArchive(cap, tau), born_t=t)
            if self.prime and k is not None:
                for ins in best_insights(population, k, cap):
                    agent.archive.add(ins, t)
            population.add(agent)
            events.append(LifecycleEvent("seed", t, [], agent.agent_id, k))
        return events

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {"recent": list(self.recent), "last_fork": dict(self.last_fork)}

    def load_state(self, d: Mapping[str, Any]) -> None:
        """Restore :meth:`state`'s output."""
        self.recent = list(d["recent"])
        self.last_fork = {k: int(v) for k, v in d.get("last_fork", {}).items()}


def fork_agent(parent: Agent, child_id: str, t: int) -> Agent:
    """Copy of ``parent``: same archive, competence halved toward 0.5, counts reset."""
    arch = MemoryArchive.from_dict(parent.archive.to_dict())
    comp = {k: 0.5 * (c + INITIAL_COMPETENCE) for k, c in parent.competence.items()}
    return Agent(
        child_id,
        parent.system_prompt,
        arch,
        comp,
        {},
        lineage=[*parent.lineage, parent.agent_id],
        born_t=t,
    )


def merge_agents(a: Agent, b: Agent, child_id: str, t: int) -> Agent:
    """One agent: value-ranked union of both archives (<= C), per-niche max competence."""
    arch = MemoryArchive(a.archive.capacity, a.archive.tau)
    pool: dict[str, Insight] = {}
    for it in a.archive.items + b.archive.items:
        key = it.key or it.id
        if key not in pool or a.archive.value(it, t) > a.archive.value(pool[key], t):
            pool[key] = it
    ranked = sorted(pool.values(), key=lambda it: (-a.archive.value(it, t), it.id))
    arch.items = [it.copy() for it in ranked[: arch.capacity]]
    # sorted: a set's order follows PYTHONHASHSEED, and later steps iterate these dicts
    comp = {k: max(a.c(k), b.c(k)) for k in sorted(set(a.competence) | set(b.competence))}
    counts = {k: max(a.n(k), b.n(k)) for k in sorted(set(a.counts) | set(b.counts))}
    return Agent(
        child_id,
        a.system_prompt,
        arch,
        comp,
        counts,
        lineage=[*a.lineage, *b.lineage, a.agent_id, b.agent_id],
        born_t=t,
    )


def best_insights(population: Population, niche: str, r: int) -> list[Insight]:
    """The ``r`` best niche-``niche`` insights held anywhere in the pool (one per key)."""
    pool: dict[str, Any] = {}
    for a in population.agents:
        for it in a.archive.items:
            if it.niche == niche and it.kind != "pitfall":
                key = it.key or it.id
                if key not in pool or it.quality > pool[key].quality:
                    pool[key] = it
    return sorted(pool.values(), key=lambda it: (-it.quality, it.id))[:r]


def sequence_ok(population: Population) -> bool:
    """N_min <= |P| <= N_max."""
    return population.n_min <= len(population) <= population.n_max


__all__: Sequence[str] = ["Lifecycle", "LifecycleEvent", "fork_agent", "merge_agents"]
