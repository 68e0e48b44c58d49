"""Baselines over the same engine and policy: each fixes the switches of one prior method.

* :class:`SingleAgent` -- one agent; ``memory=True`` is Reflexion / ExpeL / Dynamic-Cheatsheet
  style individual reflective memory (an insight after each failure, retrieved by niche);
* :class:`MajorityVote` -- self-consistency across ``n`` memoryless agents;
* :class:`Debate` -- multi-agent debate (Du et al.), ``n`` memoryless agents, two rounds;
* :class:`BroadcastMemoryPool` -- one global insight pool shared by every agent
  (G-Memory-style symmetric sharing).

The paper's exact baseline list was not retrievable; these follow the spec.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from evochamber._evochamber import EvoChamber, EvoConfig, RunLog
from evochamber.types import Task


class _Baseline:
    config: EvoConfig

    def __init__(self, policy: Any, seed: int = 0) -> None:
        self.policy, self.seed = policy, seed

    def run(self, stream: Iterable[Task]) -> RunLog:
        return EvoChamber(self.policy, self.config, self.seed).run(stream)


class SingleAgent(_Baseline):
    """One agent answering with a self-check (SOLO_VERIFY); ``memory`` adds private reflection."""

    def __init__(self, policy: Any, memory: bool = False, capacity: int = 8, seed: int = 0) -> None:
        super().__init__(policy, seed)
        self.config = EvoConfig(
            n_agents=1, team_size=1, capacity=capacity, structure="SOLO_VERIFY",
            routing="off", lifecycle=False, memory=memory, n_min=1, n_max=1,
        )  # fmt: skip


class MajorityVote(_Baseline):
    """``n`` memoryless agents answer independently; majority answer."""

    def __init__(self, policy: Any, n: int = 3, seed: int = 0) -> None:
        super().__init__(policy, seed)
        self.config = EvoConfig(
            n_agents=n, team_size=n, structure="VOTE", routing="off", lifecycle=False,
            memory=False, n_min=n, n_max=n,
        )  # fmt: skip


class Debate(_Baseline):
    """``n`` memoryless agents, ``rounds=2`` rounds of debate, majority of the last round."""

    def __init__(self, policy: Any, n: int = 3, rounds: int = 2, seed: int = 0) -> None:
        if rounds != 2:
            raise ValueError(f"only rounds=2 is implemented (Du et al.'s setting), got {rounds}")
        super().__init__(policy, seed)
        self.config = EvoConfig(
            n_agents=n, team_size=n, structure="DEBATE", routing="off", lifecycle=False,
            memory=False, n_min=n, n_max=n,
        )  # fmt: skip


class BroadcastMemoryPool(_Baseline):
    """One global pool of capacity C that every agent reads and every failure writes to."""

    def __init__(
        self, policy: Any, n_agents: int = 20, team_size: int = 3, capacity: int = 8,
        seed: int = 0,
    ) -> None:  # fmt: skip
        super().__init__(policy, seed)
        self.config = EvoConfig(
            n_agents=n_agents, team_size=team_size, capacity=capacity, routing="broadcast",
            lifecycle=False, shared_memory=True, n_min=team_size, n_max=n_agents,
        )  # fmt: skip
