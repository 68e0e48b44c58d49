"""EVA: the evidence-seeking visual agent (SER -> ITR -> ECV), with an auditable ledger."""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import Any

from eva_agent._validation import as_rgb, check_question
from eva_agent._vocab import QTYPES, infer_qtype
from eva_agent.replan import IterativeReplanner, assess
from eva_agent.router import ThresholdRouter
from eva_agent.types import AgentResult, Evidence, Observation, ToolCall, Verdict
from eva_agent.verify import EvidenceVerifier
from eva_agent.vlm.base import ReplyParseError
from methodkit.checks import check_int


class EVAgent:
    """Evidence-seeking Visual Agent.

    Algorithm (spec; every part inferred from the abstract):

    1. **SER** - fast pass ``a0, c_hat = vlm.answer(I, q)``; risk
       ``r = max(1 - c_hat, pi[type(q)])``; answer ``a0`` directly iff ``r <= tau``.
    2. **ITR** - for round j = 1..R: the VLM proposes ``ToolCall(name, args)`` from (q, I, E);
       the tool runs; the assessor labels the observation ok | empty | error | low_conf |
       irrelevant | conflict, and the label with a diagnosis goes back to the VLM; stop when
       the evidence is sufficient (a relevant item with conf >= 0.8, or two tools agree).
    3. **ECV** - candidate ``a = vlm.answer(I, q, E)``; verdict supported | contradicted |
       unverifiable. Unverifiable: one more ITR round while the budget lasts. Contradicted:
       re-answer with an evidence-first instruction; if still contradicted and the evidence's
       own answer has conf >= 0.8, output it. An answer kept unverified is flagged.

    Args:
        vlm: A :class:`~eva_agent.vlm.VLM` (``SimulatedVLM``, ``OpenAIVLM``, ``HFVLM``).
        tools: The tools the agent holds (unique names).
        router: SER router (default ``ThresholdRouter(0.5)``); ``AlwaysSlow()`` for AlwaysTool.
        replanner: ITR loop (default ``IterativeReplanner(max_rounds=3)``).
        verifier: ECV (default ``EvidenceVerifier()``); ``verify=False`` switches ECV off.
        budget: Most tool calls per question.
        verify: Whether ECV runs.
        plan_hints: Extra hints for every planning call (``{"single_shot": True}``).

    Images: a PIL image, or an (H, W) / (H, W, C) array, uint8 in [0, 255] or float in [0, 1]
    (scaled by 255); NaN, infinity, other ranges and channels-first arrays raise (see
    :meth:`run`).

    References:
        EVA: Evidence-seeking Visual Agent (NeurIPS 2026; abstract only). Inferred from
        VisProg, ViperGPT, MM-REACT, Visual Sketchpad and EAGLE (arXiv 2605.30698).

    Example:
        >>> from eva_agent import EVAgent, ShapeColorDetector, SimulatedVLM, ThresholdRouter
        >>> from eva_agent.world import ShapeTextVQA
        >>> item = ShapeTextVQA(6, seed=0)[2]
        >>> agent = EVAgent(SimulatedVLM(seed=0), [ShapeColorDetector()], ThresholdRouter(0.0))
        >>> res = agent.run(item.image, item.question, item.qtype)
        >>> res.route, res.answer == item.answer
        ('slow', True)
    """

    def __init__(
        self,
        vlm: Any,
        tools: Sequence[Any],
        router: Any = None,
        replanner: IterativeReplanner | None = None,
        verifier: EvidenceVerifier | None = None,
        budget: int = 6,
        *,
        verify: bool = True,
        plan_hints: dict[str, Any] | None = None,
    ) -> None:
        for name in ("answer", "plan"):
            if not callable(getattr(vlm, name, None)):
                raise TypeError(f"vlm must have an {name}() method; got {type(vlm).__name__}")
        self.vlm = vlm
        self.tools: dict[str, Any] = {}
        if not isinstance(tools, (list, tuple)):
            raise TypeError(f"tools must be a list of tools, got {type(tools).__name__}")
        for t in tools:
            if not callable(t) or not isinstance(getattr(t, "name", None), str):
                raise TypeError(f"every tool needs a str .name and __call__; got {t!r}")
            if t.name in self.tools:
                raise ValueError(f"two tools are named {t.name!r}; tool names must be unique")
            self.tools[t.name] = t
        self.router = router if router is not None else ThresholdRouter(0.5)
        self.replanner = replanner if replanner is not None else IterativeReplanner(3)
        self.verifier = verifier if verifier is not None else EvidenceVerifier()
        self.budget = check_int("budget", budget, low=1)
        self.verify = bool(verify)
        self.plan_hints = dict(plan_hints or {})

    def call_tool(self, name: str, image: Any, **args: Any) -> Observation:
        """Run one of the agent's tools by name.

        Raises:
            ValueError: If the agent holds no tool of that name.
        """
        if name not in self.tools:
            raise ValueError(f"no tool named {name!r}; the agent holds {sorted(self.tools)}")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                obs = self.tools[name](image, **args)
            except (TypeError, ValueError) as e:
                obs = Observation("error", [], f"{name}: {e}")
        for w in caught:  # clipped regions: keep the warning in the evidence
            obs.diagnosis = (obs.diagnosis + "; " if obs.diagnosis else "") + str(w.message)
        return obs

    def _runner(self, image: Any, question: str, ledger: list[Evidence]) -> Any:
        def run(step: ToolCall, j: int) -> Evidence:
            try:
                obs = self.call_tool(step.name, image, **step.args)
                kind = getattr(self.tools[step.name], "kind", "")
            except ValueError as e:  # a tool the agent does not hold: an error observation
                obs, kind = Observation("error", [], str(e)), ""
            region = step.args.get("region")
            a = assess(obs, question, ledger, kind, region)
            if not obs.diagnosis or a.status != "ok":
                obs.diagnosis = (
                    a.diagnosis if not obs.diagnosis else f"{a.diagnosis}; {obs.diagnosis}"
                )
            conf = max((float(i.get("conf", 0.0)) for i in obs.items), default=0.0)
            reg = tuple(region) if isinstance(region, list | tuple) else None
            return Evidence(step.name, dict(step.args), obs, conf, reg, j, a.status, kind)

        return run

    def _itr(
        self,
        image: Any,
        q: str,
        qtype: str,
        ledger: list[Evidence],
        log: list[str],
        first: int,
        rounds: int | None,
        feedback: dict | None = None,
    ) -> tuple[int, int]:
        hints = {
            "tools": [
                {"name": t.name, "kind": getattr(t, "kind", ""), "schema": getattr(t, "schema", {})}
                for t in self.tools.values()
            ],
            **self.plan_hints,
        }
        budget = self.budget - sum(1 for e in ledger if e.tool != "(parse)")
        try:
            return self.replanner.run(
                self.vlm,
                image,
                q,
                qtype,
                ledger,
                self._runner(image, q, ledger),
                budget,
                log,
                first,
                rounds,
                hints,
                feedback,
            )
        except ReplyParseError as e:  # after the back-end's one repair retry
            ledger.append(
                Evidence("(parse)", {}, Observation("error", [], str(e)), 0.0, None, first, "error")
            )
            log.append(f"round {first}: planner reply unparseable: {e}")
            return 0, 1

    def run(self, image: Any, question: str, qtype: str | None = None) -> AgentResult:
        """Answer ``question`` about ``image``; see the class docstring for the algorithm.

        Raises:
            TypeError: If ``image`` is not a PIL image or a numeric array, or is a boolean
                mask.
            ValueError: If ``image`` has zero size, a shape other than (H, W) or (H, W, C),
                NaN or infinite values or values outside [0, 1] (float) / [0, 255] (integer),
                ``question`` is empty or ``qtype`` unknown.
        """
        t0 = time.perf_counter()
        img = as_rgb(image)
        q = check_question(question)
        if qtype is not None and qtype not in QTYPES:
            raise ValueError(f"qtype must be one of {QTYPES} or None, got {qtype!r}")
        qtype = qtype or infer_qtype(q)
        log: list[str] = []
        a0, c0 = self.vlm.answer(img, q)  # SER fast pass
        c0 = min(1.0, max(0.0, float(c0)))
        risk = float(self.router.risk(c0, qtype, answer=a0))
        if not self.router.route(c0, qtype, answer=a0):
            log.append(f"SER: r={risk:.3f} <= tau={self.router.tau:.3f}: fast path")
            return AgentResult(
                a0, "fast", [], None, 0, time.perf_counter() - t0, 1, risk, False, log
            )
        log.append(f"SER: r={risk:.3f} > tau={self.router.tau:.3f}: slow path")
        ledger: list[Evidence] = []
        n_calls, n_vlm = self._itr(img, q, qtype, ledger, log, 1, None)
        answer, _ = self.vlm.answer(img, q, evidence=ledger)
        n_vlm += 2
        verdict: Verdict | None = None
        if self.verify:
            answer, verdict, c, v = self._ecv(img, q, qtype, ledger, answer, log)
            n_calls, n_vlm = n_calls + c, n_vlm + v
        flagged = verdict is not None and verdict.label != "supported"
        return AgentResult(
            answer,
            "slow",
            ledger,
            verdict,
            n_calls,
            time.perf_counter() - t0,
            n_vlm,
            risk,
            flagged,
            log,
        )

    def _ecv(
        self, img: Any, q: str, qtype: str, ledger: list[Evidence], answer: str, log: list[str]
    ) -> tuple[str, Verdict, int, int]:
        calls = vlm = 0
        v = self.verifier.check(answer, ledger, qtype, q)
        log.append(f"ECV: {answer!r} {v.label} ({v.reason})")
        used = sum(1 for e in ledger if e.tool != "(parse)")
        if v.label == "unverifiable" and self.replanner.replan and used < self.budget:
            fb = {
                "status": "unverifiable",
                "diagnosis": v.reason,
                "tool": "",
                "args": {},
                "round": self.replanner.max_rounds,
            }
            c, p = self._itr(img, q, qtype, ledger, log, self.replanner.max_rounds + 1, 1, fb)
            answer, _ = self.vlm.answer(img, q, evidence=ledger)
            calls, vlm = calls + c, vlm + p + 1
            v = self.verifier.check(answer, ledger, qtype, q)
            log.append(f"ECV after one more round: {answer!r} {v.label}")
        if v.label == "contradicted":
            answer, _ = self.vlm.answer(img, q, evidence=ledger, hints={"evidence_first": True})
            vlm += 1
            v = self.verifier.check(answer, ledger, qtype, q)
            log.append(f"ECV evidence-first re-answer: {answer!r} {v.label}")
            if (
                v.label == "contradicted"
                and v.evidence_answer is not None
                and v.evidence_conf >= self.verifier.evidence_conf
            ):
                answer = v.evidence_answer
                v = self.verifier.check(answer, ledger, qtype, q)
                log.append(f"ECV: output the evidence's answer {answer!r} ({v.label})")
        return answer, v, calls, vlm
