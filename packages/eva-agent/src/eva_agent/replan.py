"""Iterative Tool Replanning (ITR): the observation assessor and the replanning loop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eva_agent.types import Evidence, Final, Observation, ToolCall
from eva_agent.verify import (
    EVIDENCE_CONF,
    covering,
    evidence_answer,
    fuzzy_match,
    relevant_detections,
    relevant_ocr,
)
from methodkit.checks import check_int

LOW_CONF = 0.5
#: What kind of evidence each question type needs (feedback to the planner).
NEEDS = {
    "read": "text under the entity (ground it, then OCR its label zone, zoom 2-3x)",
    "arithmetic": "the entities, then OCR of the numbers under each",
    "spatial": "all shapes (detect without filters)",
}


@dataclass(frozen=True)
class Assessment:
    """The assessor's label of one observation and a short diagnosis for the planner."""

    status: str
    diagnosis: str


def assess(
    observation: Observation,
    question: str,
    ledger: list[Evidence],
    kind: str = "ocr",
    region: Any = None,
) -> Assessment:
    """Label an observation against the question and the earlier evidence.

    ``error`` (the tool failed), ``empty`` (nothing found), ``irrelevant`` (no entity of the
    question near it or named in it), ``low_conf`` (best relevant confidence < 0.5),
    ``conflict`` (disagrees with earlier relevant evidence), else ``ok``.

    Args:
        observation: The new observation.
        question: The question.
        ledger: The evidence before this observation.
        kind: The tool's kind (``ocr``, ``detect``, ...).
        region: The region the call asked for (None = whole image).
    """
    if observation.status == "error":
        return Assessment("error", observation.diagnosis or "the tool failed")
    if not observation.items:
        hint = (
            "enlarge or shift the region, upscale 2-3x or switch engine"
            if kind == "ocr"
            else ("relax the phrase or the filters")
        )
        return Assessment("empty", f"nothing found; {hint}")
    probe = Evidence("?", {"region": region}, observation, 1.0, region, 0, kind=kind)
    if kind == "detect":
        rel = relevant_detections(question, [probe])
        if not rel and not covering(question, [probe]):
            return Assessment("irrelevant", "no detection matches the entities of the question")
        before = relevant_detections(question, ledger)
        if before and covering(question, ledger) and len(before) != len(rel):
            return Assessment("conflict", f"{len(rel)} matches now vs {len(before)} before")
        return Assessment("ok", f"{len(rel)} matching detection(s)")
    if kind == "ocr":
        pairs = relevant_ocr(question, [*ledger, probe])
        mine = [p for p in pairs if any(p[0]["box"] == it["box"] for it in observation.items)]
        if not mine:
            why = (
                "the text is not under the entity; shift the region"
                if relevant_detections(question, ledger)
                else "no entity of the question near it; ground it first"
            )
            return Assessment("irrelevant", why)
        best = max(p[0]["conf"] for p in mine)
        if best < LOW_CONF:
            return Assessment("low_conf", f"best confidence {best:.2f}; upscale or switch engine")
        earlier = [p for p in relevant_ocr(question, ledger) if p[1] is not None]
        for item, det in mine:
            for old, odet in earlier:
                same = det is not None and odet is not None and det["box"] == odet["box"]
                if same and not fuzzy_match(old["text"], item["text"]):
                    return Assessment(
                        "conflict",
                        f"read {item['text']!r} vs {old['text']!r} before; "
                        "read again with the other engine or another zoom",
                    )
        return Assessment("ok", f"read {[p[0]['text'] for p in mine]}")
    return Assessment("ok", "")


def sufficient(question: str, qtype: str, ledger: list[Evidence]) -> bool:
    """Stop rule: the evidence gives an answer with confidence >= 0.8.

    Two agreeing OCR engines count as 0.8.
    """
    ev = evidence_answer(question, qtype, ledger)
    return ev is not None and ev[1] >= EVIDENCE_CONF


#: ``call(step, round) -> Evidence`` runs one tool call for the loop.
ToolRunner = Callable[[ToolCall, int], Evidence]


class IterativeReplanner:
    """ITR: plan a tool call, run it, assess the observation, feed the diagnosis back.

    For round j = 1..R the VLM proposes ``ToolCall(name, args)`` from (q, I, E); the tool runs;
    :func:`assess` labels the observation and the label plus a diagnosis go back to the VLM,
    which revises the tool and its arguments. The loop stops when the evidence is
    :func:`sufficient`, when the VLM answers, or when the tool budget is spent.

    Args:
        max_rounds: R (spec: 3).
        replan: False gives one planning step without feedback (the SingleShotTool ablation).
    """

    def __init__(self, max_rounds: int = 3, replan: bool = True) -> None:
        self.max_rounds = check_int("max_rounds", max_rounds, low=1)
        self.replan = bool(replan)

    def run(
        self,
        vlm: Any,
        image: Any,
        question: str,
        qtype: str,
        ledger: list[Evidence],
        call: ToolRunner,
        budget: int,
        log: list[str],
        first_round: int = 1,
        rounds: int | None = None,
        hints: dict[str, Any] | None = None,
        feedback: dict[str, Any] | None = None,
    ) -> tuple[int, int]:
        """Run up to ``rounds`` (default ``max_rounds``) rounds; append to ``ledger``.

        Returns:
            ``(tool_calls, vlm_calls)`` made.
        """
        n_rounds = self.max_rounds if rounds is None else rounds
        calls = vlm_calls = 0
        for j in range(first_round, first_round + n_rounds):
            if calls >= budget:
                log.append(f"round {j}: tool budget spent")
                break
            step = vlm.plan(image, question, ledger, feedback if self.replan else None, hints=hints)
            vlm_calls += 1
            if isinstance(step, Final):
                log.append(f"round {j}: planner answered {step.answer!r}")
                break
            entry = call(step, j)
            calls += 1
            ledger.append(entry)
            log.append(f"round {j}: {step.name}({step.args}) -> {entry.status}")
            if sufficient(question, qtype, ledger):
                log.append(f"round {j}: evidence sufficient")
                break
            diagnosis = entry.output.diagnosis
            status = entry.status
            if status == "ok":
                status = "insufficient"
                diagnosis = f"evidence not sufficient yet; needs {NEEDS.get(qtype, 'detections')}"
            feedback = {
                "status": status,
                "diagnosis": diagnosis,
                "tool": step.name,
                "args": dict(step.args),
                "round": j,
            }
            if not self.replan:
                break
        return calls, vlm_calls
