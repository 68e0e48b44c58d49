"""CoDream: post-failure collaborative reflection with asymmetric routing of the insights.

Five phases (count from a public summary of the paper; contents inferred):
(i) replay the task, member answers and feedback; (ii) each member reflects on its own step;
(iii) cross-examination of the reflections; (iv) distillation into at most ``m`` insights
tagged with niche k and a quality estimate; (v) asymmetric routing, strong -> weak on k.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evochamber.agent import Agent
from evochamber.population import Population
from evochamber.types import Insight, Task, TeamOutcome, normalize_answer
from methodkit.checks import check_int, check_real

ROUTINGS = ("asymmetric", "broadcast", "self", "off")
SCOPES = ("team", "active")
TRIGGERS = ("failure", "failure_or_disagreement")


def check_choice(name: str, value: str, allowed: Sequence[str]) -> str:
    """Raise ValueError unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"unknown {name} {value!r}; allowed: {list(allowed)}")
    return value


def is_guarded(agent: Agent, niche: str, guard: float) -> bool:
    """An established specialist of another niche: top niche j != k with c[a, j] >= guard."""
    top = agent.top_niche()
    return top is not None and top != niche and agent.c(top) >= guard


@dataclass
class RoutingPlan:
    """Who gives and who receives niche-k knowledge after a CoDream.

    ``cold_start``: the niche has no strong-to-weak gradient yet (no alive agent answered it,
    no member reaches the median, or no agent that answered it sits below the median); then
    every member receives.
    """

    median: float | None
    donors: list[str]
    recipients: list[str]
    guarded: list[str]
    cold_start: bool = False


def plan_routing(
    population: Population,
    team: Sequence[Agent],
    niche: str,
    *,
    scope: str = "team",
    guard: float = 0.7,
    active: Collection[str] = (),
) -> RoutingPlan:
    """The asymmetric routing rule on niche ``niche``.

    median_k = median of c[., k] over alive agents with n[., k] >= 1; donors D = members with
    c >= median_k; recipients R = members with c < median_k, plus
    (``scope="active"``) alive agents in ``active`` with c < median_k; agents guarded as
    specialists of another niche never receive. Cold start (every member receives): no alive
    agent answered k, no member is a donor, or no agent that answered k is below median_k.
    """
    seen = [a.c(niche) for a in population.agents if a.n(niche) >= 1]
    if not seen:
        return RoutingPlan(None, [], [], [], cold_start=True)
    med = float(np.median(seen))
    donors = [a.agent_id for a in team if a.c(niche) >= med]
    cold = not donors or not any(c < med for c in seen)
    pool = list(team)
    if scope == "active":
        ids = {a.agent_id for a in team}
        pool += [a for a in population.agents if a.agent_id in active and a.agent_id not in ids]
    guarded = [a.agent_id for a in pool if is_guarded(a, niche, guard)]
    recipients = [a.agent_id for a in pool if a.c(niche) < med and a.agent_id not in guarded]
    return RoutingPlan(med, donors, recipients, guarded, cold_start=cold)


@dataclass
class CoDreamReport:
    """What one CoDream did: the insights, donors, recipients and the calls it spent."""

    insights: list[Insight] = field(default_factory=list)
    donors: list[str] = field(default_factory=list)
    recipients: list[str] = field(default_factory=list)
    delivered: dict[str, list[str]] = field(default_factory=dict)
    fired: bool = False
    calls: int = 0
    tokens: int = 0


class CoDream:
    """Collaborative Dreaming over one team's failed (or contested) step.

    Trigger (paper: failure or disagreement): with a checker and ``trigger="failure"``,
    a failure fires the full protocol and a success with disagreement routes the insights to
    the dissenting members only; without a checker, disagreement fires it.
    ``trigger="failure_or_disagreement"`` fires the full protocol on either.

    Routing of an insight (phase v, ``routing="asymmetric"``): knowledge a donor already
    held goes to the recipients R (the donors keep a short pitfall note); a lesson nobody held
    goes to every member except guarded specialists; at a cold start (no alive agent answered
    k, no member reaches the median, or nobody who answered k sits below it) every member
    receives. ``"broadcast"``: every alive agent; ``"self"``: the reflector (the anchor) only;
    ``"off"``: CoDream never fires.

    Args:
        policy: The :class:`~evochamber.policies.base.SolverPolicy` that reflects,
            cross-examines and distills.
        max_insights: ``m``, the most insights distilled per CoDream.
        routing: ``"asymmetric" | "broadcast" | "self" | "off"``.
        route_scope: ``"team"`` or ``"active"`` (adds agents active on k in the last
            ``window`` tasks).
        trigger: ``"failure"`` or ``"failure_or_disagreement"``.
        specialist_guard: ``c`` at which a specialist of another niche is not written to.
        window: ``W`` for ``route_scope="active"``.
        donor_notes: Donors keep a pitfall note when their knowledge is routed.
    """

    def __init__(
        self,
        policy: Any,
        max_insights: int = 2,
        routing: str = "asymmetric",
        route_scope: str = "team",
        trigger: str = "failure",
        specialist_guard: float = 0.7,
        window: int = 100,
        donor_notes: bool = True,
    ) -> None:
        check_int("max_insights", max_insights, 1)
        check_int("window", window, 1)
        self.policy = policy
        self.max_insights = int(max_insights)
        self.routing = check_choice("routing", routing, ROUTINGS)
        self.route_scope = check_choice("route_scope", route_scope, SCOPES)
        self.trigger = check_choice("trigger", trigger, TRIGGERS)
        self.guard = check_real("specialist_guard", specialist_guard, 0.0, 1.0)
        self.window = int(window)
        self.donor_notes = donor_notes

    def dissenters(self, team: Sequence[Agent], outcome: TeamOutcome) -> list[str]:
        """Members whose answer differs from the team's."""
        ans = normalize_answer(outcome.answer)
        return [
            a.agent_id
            for a in team
            if a.agent_id in outcome.member_answers
            and normalize_answer(outcome.member_answers[a.agent_id]) != ans
        ]

    def mode(self, outcome: TeamOutcome) -> str | None:
        """``"full"``, ``"dissent"`` or None (does not fire)."""
        if self.routing == "off":
            return None
        if outcome.success is False:
            return "full"
        if outcome.disagreement:
            if outcome.success is None or self.trigger == "failure_or_disagreement":
                return "full"
            return "dissent"
        return None

    def run(
        self,
        team: Sequence[Agent],
        task: Task,
        outcome: TeamOutcome,
        population: Population,
        t: int,
        ctx: Any = None,
        active: Collection[str] = (),
    ) -> CoDreamReport:
        """Run the five phases when triggered; returns what was routed to whom."""
        mode = self.mode(outcome)
        if mode is None:
            return CoDreamReport()
        calls0, tokens0 = self.policy.calls, self.policy.tokens
        niche = task.niche or ""
        # (i) replay + (ii) reflections, one per member
        reflections = [self.policy.reflect(a, task, outcome, ctx) for a in team]
        critique = self.policy.cross_examine(team, task, outcome, reflections, ctx)  # (iii)
        insights = self.policy.distill(team, task, outcome, reflections, critique, ctx)  # (iv)
        insights = insights[: self.max_insights]
        report = CoDreamReport(
            insights=insights,
            fired=True,
            calls=self.policy.calls - calls0,
            tokens=self.policy.tokens - tokens0,
        )
        plan = plan_routing(
            population, team, niche, scope=self.route_scope, guard=self.guard, active=active
        )
        report.donors = plan.donors
        only = self.dissenters(team, outcome) if mode == "dissent" else None
        for ins in insights:  # (v)
            for aid in self.targets(ins, team, population, plan, only):
                agent = population.get(aid)
                if agent.archive.add(ins, t, protect=agent.top_niche()):
                    report.delivered.setdefault(aid, []).append(ins.id)
            notes = self.donor_notes and self.routing == "asymmetric" and not plan.cold_start
            if notes and self.known(ins, plan):
                for aid in plan.donors:
                    self._note(population.get(aid), ins, t)
        report.recipients = sorted(report.delivered)
        return report

    @staticmethod
    def known(ins: Insight, plan: RoutingPlan) -> bool:
        """The insight restates knowledge a donor already held."""
        return ins.source.startswith("agent:") and ins.source[6:] in plan.donors

    def targets(
        self,
        ins: Insight,
        team: Sequence[Agent],
        population: Population,
        plan: RoutingPlan,
        only: list[str] | None = None,
    ) -> list[str]:
        """Agent ids that receive ``ins`` under the routing mode."""
        members = [a.agent_id for a in team]
        if self.routing == "broadcast":
            out = [a.agent_id for a in population.agents]
        elif self.routing == "self":
            out = members[:1]
        elif plan.cold_start:
            out = members
        elif self.known(ins, plan):
            out = list(plan.recipients)
        else:
            out = [m for m in members if m not in plan.guarded]
        if only is not None:
            out = [a for a in out if a in only and a not in plan.guarded]
        holder = ins.source[6:] if ins.source.startswith("agent:") else None
        return [a for a in out if a != holder]

    def _note(self, donor: Agent, ins: Insight, t: int) -> None:
        note = ins.copy(
            id=f"{ins.id}-note-{donor.agent_id}",
            kind="pitfall",
            text=f"pitfall seen by a teammate: {ins.text}"[:200],
            quality=0.5 * ins.quality,
            key=f"note:{ins.key}" if ins.key else None,
        )
        donor.archive.add(note, t, protect=donor.top_niche())
