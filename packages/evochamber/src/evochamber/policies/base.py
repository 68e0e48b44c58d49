"""The SolverPolicy protocol: what the evolution engine asks of a model (LLM or simulator)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from evochamber.agent import Agent
from evochamber.types import Insight, Reflection, Structure, Task, TeamOutcome


@dataclass
class StepContext:
    """What a policy may use on one step: the step index, the engine's generator, retrieval."""

    t: int
    rng: np.random.Generator
    retrieve_r: int = 4


@runtime_checkable
class SolverPolicy(Protocol):
    """Solve, reflect, cross-examine, distill; ``calls``/``tokens`` count the model's work."""

    calls: int
    tokens: int

    def solve(
        self, team: Sequence[Agent], structure: Structure, task: Task, ctx: StepContext
    ) -> TeamOutcome:
        """The team's answer to ``task`` under ``structure``."""

    def reflect(
        self, agent: Agent, task: Task, outcome: TeamOutcome, ctx: StepContext
    ) -> Reflection:
        """CoDream phase (ii): one member's reflection on its own step."""

    def cross_examine(
        self,
        team: Sequence[Agent],
        task: Task,
        outcome: TeamOutcome,
        reflections: list[Reflection],
        ctx: StepContext,
    ) -> Any:
        """CoDream phase (iii): the team cross-examines the reflections."""

    def distill(
        self,
        team: Sequence[Agent],
        task: Task,
        outcome: TeamOutcome,
        reflections: list[Reflection],
        critique: Any,
        ctx: StepContext,
    ) -> list[Insight]:
        """CoDream phase (iv): at most ``m`` insights tagged with the task's niche."""

    def self_reflect(
        self, agent: Agent, task: Task, outcome: TeamOutcome, ctx: StepContext
    ) -> list[Insight]:
        """Private reflection of one agent after a failure (no CoDream)."""

    def learn(
        self, agent: Agent, task: Task, correct: bool | None, ctx: StepContext
    ) -> list[Insight]:
        """Insights an agent writes after its own step."""


class BasePolicy:
    """Counters and defaults shared by the policies (no learning by doing, no merge model)."""

    def __init__(self) -> None:
        self.calls = 0
        self.tokens = 0

    def learn(
        self, agent: Agent, task: Task, correct: bool | None, ctx: StepContext
    ) -> list[Insight]:
        """Insights an agent writes after its own step (none by default)."""
        return []

    def merge_archives(self, a: Agent, b: Agent, t: int) -> list[Insight]:
        """Value-ranked union of two archives (what the lifecycle's merge keeps)."""
        pool = {(it.key or it.id): it for it in a.archive.items + b.archive.items}
        ranked = sorted(pool.values(), key=lambda it: -a.archive.value(it, t))
        return ranked[: a.archive.capacity]
