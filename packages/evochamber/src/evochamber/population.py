"""The pool of agents, bounded by N_min and N_max."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from evochamber.agent import Agent
from evochamber.memory import MemoryArchive


class Population:
    """Alive agents, retired agents and the niches seen so far.

    Args:
        agents: The initial agents (ids unique).
        n_min: Fewest alive agents the lifecycle keeps (>= 1).
        n_max: Most alive agents (>= n_min).

    Raises:
        ValueError: On duplicate ids, ``n_min > n_max`` or ``n_min < 1``.
    """

    def __init__(self, agents: list[Agent], n_min: int = 1, n_max: int | None = None) -> None:
        n_max = len(agents) if n_max is None else n_max
        if n_min < 1:
            raise ValueError(f"n_min must be >= 1, got {n_min}")
        if n_min > n_max:
            raise ValueError(f"n_min ({n_min}) must be <= n_max ({n_max})")
        ids = [a.agent_id for a in agents]
        if len(set(ids)) != len(ids):
            raise ValueError("agent ids must be unique")
        self.agents = list(agents)
        self.retired: list[Agent] = []
        self.n_min, self.n_max = int(n_min), int(n_max)
        self.niches: list[str] = []
        self._next = len(agents)

    @classmethod
    def blank(
        cls,
        n: int,
        capacity: int = 8,
        tau: float = 300.0,
        n_min: int = 1,
        n_max: int | None = None,
        system_prompt: str = "You are a careful problem solver.",
    ) -> Population:
        """``n`` identical blank agents ``a00``, ``a01``, ..."""
        agents = [Agent(f"a{i:02d}", system_prompt, MemoryArchive(capacity, tau)) for i in range(n)]
        return cls(agents, n_min=n_min, n_max=n if n_max is None else n_max)

    def __len__(self) -> int:
        return len(self.agents)

    def __iter__(self) -> Iterator[Agent]:
        return iter(self.agents)

    def get(self, agent_id: str) -> Agent:
        """The alive agent ``agent_id``."""
        for a in self.agents:
            if a.agent_id == agent_id:
                return a
        raise KeyError(f"no alive agent {agent_id!r}")

    def see(self, niche: str) -> None:
        """Register a niche label."""
        if niche not in self.niches:
            self.niches.append(niche)

    def new_id(self) -> str:
        """A fresh agent id."""
        taken = {a.agent_id for a in self.agents + self.retired}
        while f"a{self._next:02d}" in taken:
            self._next += 1
        self._next += 1
        return f"a{self._next - 1:02d}"

    def add(self, agent: Agent) -> None:
        """Add an agent (ValueError at n_max)."""
        if len(self.agents) >= self.n_max:
            raise ValueError(f"population is at n_max={self.n_max}")
        self.agents.append(agent)

    def retire(self, agent: Agent) -> None:
        """Remove ``agent`` from the pool for good (pruned or merged away)."""
        if len(self.agents) <= self.n_min:
            raise ValueError(f"population is at n_min={self.n_min}")
        self.agents.remove(agent)
        agent.alive = False
        self.retired.append(agent)

    def replace(self, old: list[Agent], new: Agent) -> None:
        """Retire ``old`` and add ``new`` in one move (a merge), keeping the bounds."""
        size = len(self.agents) - len(old) + 1
        if not self.n_min <= size <= self.n_max:
            raise ValueError(f"replacing {len(old)} agents by one leaves {size} agents")
        for a in old:
            self.agents.remove(a)
            a.alive = False
            self.retired.append(a)
        self.agents.append(new)

    def competence_matrix(self, niches: list[str] | None = None) -> np.ndarray:
        """``c[a, k]`` as an (alive agents x niches) array."""
        ks = self.niches if niches is None else niches
        return np.array([[a.c(k) for k in ks] for a in self.agents], dtype=float).reshape(
            len(self.agents), len(ks)
        )

    def count_matrix(self, niches: list[str] | None = None) -> np.ndarray:
        """``n[a, k]`` as an (alive agents x niches) integer array."""
        ks = self.niches if niches is None else niches
        return np.array([[a.n(k) for k in ks] for a in self.agents], dtype=int).reshape(
            len(self.agents), len(ks)
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "agents": [a.to_dict() for a in self.agents],
            "retired": [a.to_dict() for a in self.retired],
            "n_min": self.n_min,
            "n_max": self.n_max,
            "niches": list(self.niches),
            "next": self._next,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Population:
        """Rebuild from :meth:`to_dict`'s output."""
        p = cls([Agent.from_dict(x) for x in d["agents"]], int(d["n_min"]), int(d["n_max"]))
        p.retired = [Agent.from_dict(x) for x in d["retired"]]
        p.niches = list(d["niches"])
        p._next = int(d["next"])
        return p
