"""Data types of the agent: tool calls, observations, the evidence ledger, verdicts, results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Assessor labels of one observation (spec: ok | empty | error | low_conf | irrelevant | conflict).
STATUSES = ("ok", "empty", "error", "low_conf", "irrelevant", "conflict")
#: Verdicts of Evidence Consistency Verification.
VERDICTS = ("supported", "contradicted", "unverifiable")


@dataclass(frozen=True)
class ToolCall:
    """A tool the VLM asks for, with its JSON arguments."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Final:
    """The VLM's "no more tools, here is my answer"."""

    answer: str
    conf: float = 1.0


@dataclass
class Observation:
    """What one tool call returned.

    Attributes:
        status: ``ok`` or ``error`` from the tool; the assessor may relabel it.
        items: JSON-able dicts: OCR ``{"text", "conf", "box"}``, detections
            ``{"label", "color", "shape", "conf", "box"}``, calculator ``{"value"}``. Boxes are
            ``(x0, y0, x1, y1)`` in the original image's pixels.
        diagnosis: A short reason (for ``error`` and for the assessor's labels).
    """

    status: str
    items: list[dict[str, Any]] = field(default_factory=list)
    diagnosis: str = ""


@dataclass
class Evidence:
    """One entry of the evidence ledger (one tool call, in call order)."""

    tool: str
    args: dict[str, Any]
    output: Observation
    conf: float
    region: tuple[int, int, int, int] | None
    round: int
    status: str = "ok"
    kind: str = ""


@dataclass(frozen=True)
class Verdict:
    """Result of checking an answer against the ledger.

    Attributes:
        label: ``supported``, ``contradicted`` or ``unverifiable``.
        claim: The normalised claim extracted from the answer (None if none could be).
        evidence_answer: The answer the evidence alone gives (None if it gives none).
        evidence_conf: Confidence of ``evidence_answer`` (0 when None).
        reason: One line on why.
    """

    label: str
    claim: str | None = None
    evidence_answer: str | None = None
    evidence_conf: float = 0.0
    reason: str = ""


@dataclass
class AgentResult:
    """What :meth:`eva_agent.EVAgent.run` returns.

    Attributes:
        answer: The final answer.
        route: ``fast`` (direct answer) or ``slow`` (tool path).
        ledger: The evidence ledger, in call order.
        verdict: The final ECV verdict (None on the fast path or when ECV is off).
        n_tool_calls: Tool calls made.
        seconds: Wall time of the run.
        n_vlm_calls: VLM calls made (answer, plan and judge calls).
        risk: The router's risk score.
        flagged: True when the answer was kept although unverifiable or contradicted.
        log: Every decision, in order.
    """

    answer: str
    route: str
    ledger: list[Evidence]
    verdict: Verdict | None
    n_tool_calls: int
    seconds: float
    n_vlm_calls: int = 0
    risk: float = 0.0
    flagged: bool = False
    log: list[str] = field(default_factory=list)


@dataclass
class QAItem:
    """One visual question with its ground truth."""

    image: Any
    question: str
    answer: str
    qtype: str
    meta: dict[str, Any] = field(default_factory=dict)
