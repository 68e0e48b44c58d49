"""An agent: a system prompt over the shared frozen model, a private archive, competences."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evochamber.memory import MemoryArchive

INITIAL_COMPETENCE = 0.5


@dataclass
class Agent:
    """One member of the pool.

    Args:
        agent_id: Unique id.
        system_prompt: The agent's persona (LLM mode).
        archive: Its private :class:`MemoryArchive`.
        competence: EWMA competence ``c[a, k]`` per niche (0.5 until first seen).
        counts: ``n[a, k]``: how many niche-k tasks it answered.
        lineage: Ids of the agents it descends from (fork / merge), oldest first.
        born_t: Step at which it joined the pool.
    """

    agent_id: str
    system_prompt: str = "You are a careful problem solver."
    archive: MemoryArchive = field(default_factory=MemoryArchive)
    competence: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    lineage: list[str] = field(default_factory=list)
    born_t: int = 0
    alive: bool = True

    def c(self, niche: str) -> float:
        """``c[a, niche]`` (0.5 for a niche it never answered)."""
        return self.competence.get(niche, INITIAL_COMPETENCE)

    def n(self, niche: str) -> int:
        """``n[a, niche]``."""
        return self.counts.get(niche, 0)

    def covers(self, niche: str, threshold: float = 0.5) -> bool:
        """Whether it answered ``niche`` and reached ``c >= threshold`` there.

        The 0.5 prior of a niche it never answered is no evidence of competence: without the
        ``n >= 1`` condition every blank agent would cover every niche at the spec's 0.5.
        """
        return self.n(niche) >= 1 and self.c(niche) >= threshold

    def top_niche(self) -> str | None:
        """The niche of highest competence among those it answered (ties: first seen)."""
        seen = [k for k, v in self.counts.items() if v >= 1]
        if not seen:
            return None
        return max(seen, key=lambda k: self.c(k))

    def update_competence(self, niche: str, outcome: float, lam: float) -> float:
        """EWMA step ``c <- (1 - lam) c + lam s`` and ``n += 1``; returns the new ``c``."""
        c = (1.0 - lam) * self.c(niche) + lam * float(outcome)
        self.competence[niche] = c
        self.counts[niche] = self.n(niche) + 1
        return c

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "agent_id": self.agent_id,
            "system_prompt": self.system_prompt,
            "archive": self.archive.to_dict(),
            "competence": dict(self.competence),
            "counts": dict(self.counts),
            "lineage": list(self.lineage),
            "born_t": self.born_t,
            "alive": self.alive,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Agent:
        """Rebuild from :meth:`to_dict`'s output."""
        return cls(
            agent_id=d["agent_id"],
            system_prompt=d["system_prompt"],
            archive=MemoryArchive.from_dict(d["archive"]),
            competence={k: float(v) for k, v in d["competence"].items()},
            counts={k: int(v) for k, v in d["counts"].items()},
            lineage=list(d["lineage"]),
            born_t=int(d["born_t"]),
            alive=bool(d.get("alive", True)),
        )
