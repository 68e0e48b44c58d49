"""SimPolicy: the engine's policy over NicheWorld, a STOCHASTIC SIMULATOR (no language model).

Structures in the simulator: SOLO_VERIFY catches its own error with probability 0.2 when the
anchor holds the subskill; VOTE takes the majority (ties to the anchor); DEBATE lets a correct
member holding the subskill convert each wrong member with probability 0.7; PIPELINE succeeds
at p_hi when the team's union of subskills covers the task. Simulated calls per task: SOLO_VERIFY
2, VOTE |team|, DEBATE 2 |team|, PIPELINE 3; CoDream |team| + 2; a private reflection 1.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from evochamber.agent import Agent
from evochamber.policies.base import BasePolicy, StepContext
from evochamber.sim.world import LABEL, NicheWorld
from evochamber.types import Insight, Reflection, Structure, Task, TeamOutcome


class SimPolicy(BasePolicy):
    """Simulated agents of a :class:`~evochamber.sim.NicheWorld`.

    Args:
        world: The simulator world (its constants decide every probability).
    """

    label = LABEL

    def __init__(self, world: NicheWorld | None = None) -> None:
        super().__init__()
        self.world = world or NicheWorld()
        self.cfg = self.world.config
        self.counter = 0

    def state(self) -> dict[str, int]:
        """The simulator's counters (answer / insight ids, calls, tokens): part of a saved run."""
        return {"counter": self.counter, "calls": self.calls, "tokens": self.tokens}

    def load_state(self, d: dict[str, int]) -> None:
        """Restore :meth:`state`'s output."""
        self.counter, self.calls, self.tokens = int(d["counter"]), int(d["calls"]), int(d["tokens"])

    # ---- the agent model ---------------------------------------------------------------
    def held(self, agent: Agent) -> set[str]:
        """Subskills the agent holds as a helpful insight (quality >= 0.5, not a note)."""
        q = self.cfg.helpful_q
        return {
            it.key
            for it in agent.archive.items
            if it.key is not None and it.kind != "pitfall" and it.quality >= q
        }

    def holds(self, agent: Agent, task: Task) -> bool:
        """Whether the agent holds every subskill the task needs."""
        return set(task.meta["subskills"]) <= self.held(agent)

    def p_correct(self, agent: Agent, task: Task, covered: bool | None = None) -> float:
        """p_hi(d) or p_lo(d), minus pollution x off-niche share of the archive."""
        cfg, d = self.cfg, float(task.meta["difficulty"])
        hit = self.holds(agent, task) if covered is None else covered
        a, b = cfg.p_hi if hit else cfg.p_lo
        items = agent.archive.items
        off = sum(it.niche != task.niche for it in items) / len(items) if items else 0.0
        return float(np.clip(a - b * d - cfg.pollution * off, 0.0, 1.0))

    def _draw(self, p: float, task: Task, rng: np.random.Generator) -> str:
        if rng.random() < p:
            return task.meta["answer"]
        a, b = self.cfg.attractor
        if rng.random() < a + b * float(task.meta["difficulty"]):
            return task.meta["attractor"]
        self.counter += 1
        return f"X{self.counter}"

    def _use(self, agent: Agent, task: Task, t: int) -> None:
        need = set(task.meta["subskills"])
        agent.archive.touch([it for it in agent.archive.items if it.key in need], t)

    # ---- solve -------------------------------------------------------------------------
    def solve(
        self, team: Sequence[Agent], structure: Structure, task: Task, ctx: StepContext
    ) -> TeamOutcome:
        """The team's answer to ``task`` under ``structure``."""
        rng, right = ctx.rng, task.meta["answer"]
        for a in team:
            self._use(a, task, ctx.t)
        if structure is Structure.SOLO_VERIFY:
            anchor = team[0]
            ans = self._draw(self.p_correct(anchor, task), task, rng)
            if ans != right and self.holds(anchor, task) and rng.random() < self.cfg.verify_catch:
                ans = right
            answers, final, cost = {anchor.agent_id: ans}, ans, 2
        elif structure is Structure.PIPELINE:
            cover = set(task.meta["subskills"]) <= set().union(*(self.held(a) for a in team))
            solver = team[1] if len(team) > 1 else team[0]
            final = self._draw(self.p_correct(solver, task, covered=cover), task, rng)
            answers, cost = {a.agent_id: final for a in team}, 3
        else:
            answers = {a.agent_id: self._draw(self.p_correct(a, task), task, rng) for a in team}
            votes = dict(answers)
            cost = len(team)
            if structure is Structure.DEBATE:
                cost = 2 * len(team)
                if any(votes[a.agent_id] == right and self.holds(a, task) for a in team):
                    for a in team:
                        if votes[a.agent_id] != right and rng.random() < self.cfg.debate_convert:
                            votes[a.agent_id] = right
            final = majority([votes[a.agent_id] for a in team])
        self.calls += cost
        correct = {aid: ans == right for aid, ans in answers.items()}
        return TeamOutcome(
            answer=final,
            member_answers=answers,
            success=task.check(final) if task.check else None,
            disagreement=len(set(answers.values())) > 1,
            cost=cost,
            member_correct=correct,
        )

    # ---- reflection --------------------------------------------------------------------
    def _q(self, agent: Agent, niche: str) -> float:
        a, b = self.cfg.q
        return a + b * agent.c(niche)

    def _insight(
        self, task: Task, key: str, c_best: float, t: int, rng: np.random.Generator, source: str
    ) -> Insight:
        a, b, s = self.cfg.quality
        quality = float(np.clip(a + b * c_best + s * rng.standard_normal(), 0.0, 1.0))
        self.counter += 1
        return Insight(
            id=f"i{self.counter}",
            niche=task.niche or "",
            text=f"[simulated insight: subskill {key}]",
            kind="strategy",
            source=source,
            t_created=t,
            quality=quality,
            key=key,
        )

    def reflect(
        self, agent: Agent, task: Task, outcome: TeamOutcome, ctx: StepContext
    ) -> Reflection:
        """CoDream phase (ii): one member's reflection on its own step."""
        self.calls += 1
        held = sorted(self.held(agent) & set(task.meta["subskills"]))
        return Reflection(agent.agent_id, "[simulated reflection]", {"held": held})

    def cross_examine(
        self,
        team: Sequence[Agent],
        task: Task,
        outcome: TeamOutcome,
        reflections: list[Reflection],
        ctx: StepContext,
    ) -> dict[str, Any]:
        """Pooled discovery probability min(cap, 2 * (1 - prod(1 - q_a)))."""
        self.calls += 1
        miss = float(np.prod([1.0 - self._q(a, task.niche or "") for a in team]))
        return {"p_pool": min(self.cfg.pool_cap, self.cfg.cross_exam * (1.0 - miss))}

    def distill(
        self,
        team: Sequence[Agent],
        task: Task,
        outcome: TeamOutcome,
        reflections: list[Reflection],
        critique: Any,
        ctx: StepContext,
    ) -> list[Insight]:
        """Transfer what a member holds; otherwise discover with the pooled probability."""
        self.calls += 1
        out = []
        c_best = max(a.c(task.niche or "") for a in team)
        for key in task.meta["subskills"]:
            if all(key in self.held(a) for a in team):
                continue
            # held() lists keys of archive items, so find() returns an item for each holder
            holders = [
                (item, a)
                for a in team
                if key in self.held(a) and (item := a.archive.find(key)) is not None
            ]
            if holders:
                item, who = max(holders, key=lambda p: (p[0].quality, p[1].agent_id))
                out.append(item.copy(source=f"agent:{who.agent_id}", t_created=ctx.t))
            elif ctx.rng.random() < critique["p_pool"]:
                out.append(self._insight(task, key, c_best, ctx.t, ctx.rng, "codream"))
        return out

    def self_reflect(
        self, agent: Agent, task: Task, outcome: TeamOutcome, ctx: StepContext
    ) -> list[Insight]:
        """Private reflection: finds one missing subskill with probability q_a = 0.02 + 0.08 c."""
        self.calls += 1
        missing = [k for k in task.meta["subskills"] if k not in self.held(agent)]
        if not missing or ctx.rng.random() >= self._q(agent, task.niche or ""):
            return []
        c = agent.c(task.niche or "")
        return [self._insight(task, missing[0], c, ctx.t, ctx.rng, f"self:{agent.agent_id}")]

    def learn(
        self, agent: Agent, task: Task, correct: bool | None, ctx: StepContext
    ) -> list[Insight]:
        """Learning by doing: after a success without the insight, write it with prob 0.1."""
        missing = [k for k in task.meta["subskills"] if k not in self.held(agent)]
        if not correct or not missing or ctx.rng.random() >= self.cfg.learn_p:
            return []
        c = agent.c(task.niche or "")
        return [self._insight(task, missing[0], c, ctx.t, ctx.rng, f"self:{agent.agent_id}")]


def majority(answers: Sequence[str]) -> str:
    """Most frequent answer; ties go to the earliest (the anchor answers first)."""
    counts = Counter(answers)
    top = max(counts.values())
    return next(a for a in answers if counts[a] == top)
