"""The data model: tasks, insights, experiences, collaboration structures, team outcomes."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

INSIGHT_KINDS = ("strategy", "pitfall", "check")


class Structure(enum.Enum):
    """How a team collaborates on one task (names inferred; the paper's were not retrievable)."""

    SOLO_VERIFY = "solo_verify"  # the anchor answers, then checks its own answer
    VOTE = "vote"  # independent answers, majority, ties to the anchor
    DEBATE = "debate"  # two rounds, the second sees the peers' first answers
    PIPELINE = "pipeline"  # plan -> solve -> check across the roles

    @classmethod
    def parse(cls, name: str | Structure) -> Structure:
        """``"vote"``, ``"VOTE"`` or ``Structure.VOTE`` -> ``Structure.VOTE``.

        Raises:
            ValueError: If ``name`` names no structure.
        """
        if isinstance(name, Structure):
            return name
        key = str(name).strip().lower()
        for s in cls:
            if key in (s.value, s.name.lower()):
                return s
        raise ValueError(f"unknown structure {name!r}; allowed: {[s.name for s in cls]}")


@dataclass
class Task:
    """One task of the stream.

    Args:
        task_id: Unique id within a stream.
        niche: Niche label (None: the engine's ``NicheTagger`` assigns one).
        prompt: What the agents are asked.
        check: ``check(answer) -> bool`` when a checker exists, else None (success unknown).
        meta: JSON-serialisable extra data (the simulator keeps its latent task state here).
    """

    task_id: str
    niche: str | None
    prompt: str
    check: Callable[[str], bool] | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Insight:
    """A distilled piece of knowledge kept in an agent's archive.

    ``key`` identifies what the insight is about (two insights with one key are the same
    knowledge; the simulator uses its subskill id); ``t_used`` is when it was last retrieved.
    """

    id: str
    niche: str
    text: str
    kind: str = "strategy"
    source: str = "codream"
    t_created: int = 0
    quality: float = 0.5
    uses: int = 0
    wins: int = 0
    t_used: int | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in INSIGHT_KINDS:
            raise ValueError(f"Insight kind must be one of {INSIGHT_KINDS}, got {self.kind!r}")
        if self.t_used is None:
            self.t_used = self.t_created

    def copy(self, **changes: Any) -> Insight:
        """A copy with ``changes`` applied (archives never share mutable items)."""
        return Insight(**{**asdict(self), **changes})

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Insight:
        """Rebuild from :meth:`to_dict`'s output."""
        return cls(**dict(d))


@dataclass
class Experience:
    """One solved (or failed) step of an agent: kept in its archive's experience log."""

    task_id: str
    niche: str
    answer: str
    correct: bool | None
    t: int
    structure: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)


@dataclass
class TeamOutcome:
    """Result of a team on one task.

    Args:
        answer: The team's answer.
        member_answers: ``{agent_id: answer}`` of the members that answered.
        success: ``task.check(answer)``; None when the task has no checker.
        disagreement: The members' normalised answers differ.
        cost: Model calls spent (the simulator counts simulated calls).
        member_correct: ``{agent_id: bool}`` when each member's own answer can be checked.
        tokens: Prompt + completion tokens (LLM policies; 0 in the simulator).
    """

    answer: str
    member_answers: dict[str, str]
    success: bool | None
    disagreement: bool
    cost: int
    member_correct: dict[str, bool] = field(default_factory=dict)
    tokens: int = 0


@dataclass
class Reflection:
    """What one member says about its own step (CoDream phase ii)."""

    agent_id: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


def normalize_answer(answer: str) -> str:
    """Lower-case, strip spaces and a trailing period: what "the same answer" means."""
    return " ".join(str(answer).strip().lower().rstrip(".").split())
