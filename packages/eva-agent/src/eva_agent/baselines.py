"""What EVA is compared with: direct answering, self-reflection, debate and the ablations."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from eva_agent._eva import EVAgent
from eva_agent._validation import as_rgb, check_question
from eva_agent.replan import IterativeReplanner
from eva_agent.router import AlwaysSlow
from eva_agent.types import AgentResult
from methodkit.checks import check_int


def _result(answer: str, t0: float, n_vlm: int, log: list[str]) -> AgentResult:
    return AgentResult(
        answer, "fast", [], None, 0, time.perf_counter() - t0, n_vlm, 0.0, False, log
    )


class Direct:
    """The VLM's direct answer (no tools)."""

    def __init__(self, vlm: Any) -> None:
        self.vlm = vlm

    def run(self, image: Any, question: str, qtype: str | None = None) -> AgentResult:
        """Answer ``question`` about ``image``; returns an AgentResult."""
        t0 = time.perf_counter()
        a, c = self.vlm.answer(as_rgb(image), check_question(question))
        return _result(a, t0, 1, [f"direct: {a!r} conf {c:.3f}"])


class SelfReflect:
    """Answer, critique (``vlm.judge``), revise; ``rounds`` times."""

    def __init__(self, vlm: Any, rounds: int = 1) -> None:
        self.vlm, self.rounds = vlm, check_int("rounds", rounds, low=1)

    def run(self, image: Any, question: str, qtype: str | None = None) -> AgentResult:
        """Answer ``question`` about ``image``; returns an AgentResult."""
        t0 = time.perf_counter()
        img, q = as_rgb(image), check_question(question)
        a, _ = self.vlm.answer(img, q)
        log = [f"answer {a!r}"]
        for _ in range(self.rounds):
            critique = self.vlm.judge(q, a, [])
            a, _ = self.vlm.answer(img, q, hints={"critique": critique, "previous": a})
            log.append(f"critique {critique!r} -> {a!r}")
        return _result(a, t0, 1 + 2 * self.rounds, log)


class Debate:
    """Multi-agent debate (Du et al.): answer, see the others' answers, revise, vote.

    ``n_agents`` answer, then revise for ``rounds - 1`` rounds; majority vote (ties: the
    highest summed confidence).
    """

    def __init__(self, vlm: Any, n_agents: int = 3, rounds: int = 2) -> None:
        self.vlm = vlm
        self.n_agents = check_int("n_agents", n_agents, low=2)
        self.rounds = check_int("rounds", rounds, low=1)

    def run(self, image: Any, question: str, qtype: str | None = None) -> AgentResult:
        """Answer ``question`` about ``image``; returns an AgentResult."""
        t0 = time.perf_counter()
        img, q = as_rgb(image), check_question(question)
        out = [self.vlm.answer(img, q, sample=k) for k in range(self.n_agents)]
        log = [f"round 1: {[a for a, _ in out]}"]
        for r in range(2, self.rounds + 1):
            prev = [a for a, _ in out]
            out = [
                self.vlm.answer(
                    img, q, sample=k, hints={"peers": prev[:k] + prev[k + 1 :], "own": prev[k]}
                )
                for k in range(self.n_agents)
            ]
            log.append(f"round {r}: {[a for a, _ in out]}")
        votes = Counter(a.strip().lower() for a, _ in out)
        weight = {k: sum(c for a, c in out if a.strip().lower() == k) for k in votes}
        best = max(votes, key=lambda k: (votes[k], weight[k]))
        answer = next(a for a, _ in out if a.strip().lower() == best)
        return _result(answer, t0, self.n_agents * self.rounds, log)


class AlwaysTool(EVAgent):
    """EVA without SER: every question takes the tool path."""

    def __init__(self, vlm: Any, tools: Any, **kw: Any) -> None:
        super().__init__(vlm, tools, AlwaysSlow(), **kw)


class SingleShotTool(EVAgent):
    """EVA without ITR: one planned tool call, no feedback, no extra round."""

    def __init__(self, vlm: Any, tools: Any, router: Any = None, **kw: Any) -> None:
        super().__init__(
            vlm,
            tools,
            router,
            IterativeReplanner(1, replan=False),
            plan_hints={"single_shot": True},
            **kw,
        )


class NoVerify(EVAgent):
    """EVA without ECV: the first evidence-conditioned answer is final."""

    def __init__(self, vlm: Any, tools: Any, router: Any = None, **kw: Any) -> None:
        super().__init__(vlm, tools, router, verify=False, **kw)


__all__ = ["AlwaysTool", "Debate", "Direct", "NoVerify", "SelfReflect", "SingleShotTool"]
