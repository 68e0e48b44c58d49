"""The VLM protocol, the text prompts real back-ends use, and the JSON reply parser."""

from __future__ import annotations

import json
import re
from typing import Any, Protocol, runtime_checkable

from eva_agent.types import Evidence, Final, ToolCall


class ReplyParseError(ValueError):
    """A VLM reply that is neither a tool call nor a final answer (after the repair retry)."""


class ImageNotSupportedError(RuntimeError):
    """The back-end rejected the image content part (a text-only model or server)."""


@runtime_checkable
class VLM(Protocol):
    """What the agent needs from a vision-language model.

    ``answer`` returns ``(text, confidence)``; ``hints`` may carry ``evidence_first`` (answer
    from the evidence, not the prior), ``peers`` (other agents' answers, for debate) and
    ``critique`` (self-reflection); ``sample`` indexes independent samples. ``plan`` returns
    the next :class:`ToolCall` or a :class:`Final`; ``feedback`` is the assessor's label and
    diagnosis of the last observation; ``hints["tools"]`` lists the tools the agent holds.
    ``judge`` critiques an answer in one line.
    """

    def answer(
        self,
        image: Any,
        question: str,
        evidence: list[Evidence] | None = None,
        *,
        hints: dict[str, Any] | None = None,
        sample: int = 0,
    ) -> tuple[str, float]:
        """``(text, confidence)`` for the question (with evidence when given)."""
        ...

    def plan(
        self,
        image: Any,
        question: str,
        ledger: list[Evidence],
        feedback: dict[str, Any] | None = None,
        *,
        hints: dict[str, Any] | None = None,
    ) -> ToolCall | Final:
        """The next ToolCall, or Final when the evidence suffices."""
        ...

    def judge(self, question: str, answer: str, ledger: list[Evidence]) -> str:
        """A one-line critique of ``answer``."""
        ...


def render_ledger(ledger: list[Evidence], max_items: int = 12) -> str:
    """The evidence ledger as numbered text lines for a prompt."""
    lines = []
    for k, e in enumerate(ledger, 1):
        items = []
        for it in e.output.items[:max_items]:
            if "text" in it:
                items.append(f"text {it['text']!r} conf {it['conf']:.2f} box {it['box']}")
            elif "label" in it:
                items.append(f"{it['label']} conf {it['conf']:.2f} box {it['box']}")
            elif "value" in it:
                items.append(f"value {it['value']}")
        body = "; ".join(items) or e.output.diagnosis or "nothing"
        lines.append(f"[{k}] round {e.round} {e.tool}({json.dumps(e.args)}) -> {e.status}: {body}")
    return "\n".join(lines) or "(no evidence yet)"


def answer_prompt(question: str, evidence: list[Evidence] | None, hints: dict | None) -> str:
    """The text of an answer request."""
    hints = hints or {}
    parts = []
    if evidence:
        parts.append("Evidence from tools:\n" + render_ledger(evidence))
        if hints.get("evidence_first"):
            parts.append(
                "Answer from the evidence above, not from your first impression; "
                "if the evidence contradicts your earlier answer, follow the evidence."
            )
    if hints.get("peers"):
        parts.append("Other agents answered: " + "; ".join(map(str, hints["peers"])))
    if hints.get("critique"):
        parts.append(f"A critique of your previous answer: {hints['critique']}")
    parts.append(f"Question: {question}\nAnswer with a single word, number or code.")
    return "\n\n".join(parts)


def plan_prompt(
    question: str, ledger: list[Evidence], feedback: dict | None, hints: dict | None
) -> str:
    """The text of a planning request (JSON tool-call protocol)."""
    tools = (hints or {}).get("tools", [])
    spec = "\n".join(f"- {t['name']} ({t['kind']}): args {json.dumps(t['schema'])}" for t in tools)
    parts = [
        "You answer questions about the image by collecting evidence with tools.",
        f"Tools:\n{spec}" if spec else "",
        f"Question: {question}",
        "Evidence so far:\n" + render_ledger(ledger),
    ]
    if feedback:
        parts.append(
            f"Last call was labelled {feedback['status']}: {feedback['diagnosis']}. "
            "Revise the tool or its arguments."
        )
    parts.append(
        'Reply with JSON only: {"tool": NAME, "args": {...}} to call a tool, '
        'or {"final": ANSWER} when the evidence suffices.'
    )
    return "\n\n".join(p for p in parts if p)


_JSON = re.compile(r"\{.*\}", re.S)


def parse_reply(text: str) -> ToolCall | Final:
    """A reply's JSON object as a :class:`ToolCall` or :class:`Final`.

    Raises:
        ReplyParseError: If there is no JSON object with ``tool`` (and dict ``args``) or
            ``final``.
    """
    m = _JSON.search(text or "")
    if not m:
        raise ReplyParseError(f"no JSON object in the reply {text[:120]!r}")
    try:
        obj = json.loads(m.group())
    except json.JSONDecodeError as e:
        raise ReplyParseError(f"malformed JSON in the reply: {e.msg}") from None
    if isinstance(obj, dict) and "final" in obj:
        return Final(str(obj["final"]))
    if isinstance(obj, dict) and isinstance(obj.get("tool"), str):
        args = obj.get("args", {})
        if not isinstance(args, dict):
            raise ReplyParseError(f"tool args must be an object, got {type(args).__name__}")
        return ToolCall(obj["tool"], args)
    raise ReplyParseError(f"the reply is neither a tool call nor a final answer: {obj!r}")


#: The option that ends planning in a constrained (choice-by-likelihood) plan step.
ANSWER_OPTION = "answer"


def small_plan_prompt(
    question: str, ledger: list[Evidence], tools: list[dict[str, Any]], feedback: dict | None
) -> str:
    """A plan request a ~135M model can follow: the reply is one option, scored, not parsed.

    The next step is chosen among the tool names and ``"answer"`` by log-probability (see
    ``HFVLM(constrained=True)``); two worked examples show the format.
    """
    names = ", ".join([t["name"] for t in tools] + [ANSWER_OPTION])
    kinds = "; ".join(f"{t['name']}: {t['kind']}" for t in tools)
    last = ""
    if feedback:
        last = f"\nLast call: {feedback['status']} ({feedback['diagnosis']})."
    return (
        f"Pick the next step: one of {names}.\nTools: {kinds}.\n\n"
        "Question: How many red shapes are there?\nEvidence: (no evidence yet)\nNext: detect\n\n"
        "Question: How many red shapes are there?\nEvidence: detect found red circle, red square"
        f"\nNext: {ANSWER_OPTION}\n\n"
        f"Question: {question}\nEvidence: {render_ledger(ledger, max_items=6)}{last}\nNext:"
    )


def small_arg_prompt(question: str, tool: str, arg: str) -> str:
    """Ask which value of the enum argument ``arg`` the tool should use (scored, not parsed)."""
    return (
        f"Question: Is there a blue star?\nThe {tool} tool should look for {arg}: blue\n\n"
        f"Question: {question}\nThe {tool} tool should look for {arg}:"
    )


def small_answer_prompt(question: str, evidence: list[Evidence] | None) -> str:
    """An answer request with two worked examples; the reply is one short line."""
    ev = render_ledger(evidence or [], max_items=8)
    return (
        "Answer with one word or number, on one line.\n\n"
        "Evidence: detect found red circle, red square, blue star\n"
        "Question: How many red shapes are there?\nAnswer: 2\n\n"
        "Evidence: rapidocr read 'K7' under the green triangle\n"
        "Question: What code is written under the green triangle?\nAnswer: K7\n\n"
        f"Evidence: {ev}\nQuestion: {question}\nAnswer:"
    )


#: Reply prefix forced on a small model's open answers (the reply continues it).
ANSWER_PREFIX = "Answer:"
_CODE = re.compile(r"(?<![A-Za-z0-9])(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{1,6}(?![A-Za-z0-9])")
_DIGITS = re.compile(r"\d{1,3}(?:,\d{3})+(?!\d)|\d+")  # numbers inside texts ("B42" -> 42)
_INT = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?!\d)|(?<![\w.])-?\d+(?![\d.]\d)")


def extract_open_answer(text: str | None, qtype: str | None) -> str | None:
    """The answer in a small model's open reply, or None when it holds none of the right kind.

    Tolerant: reads the text after the last ``Answer:`` when there is one (else the whole
    reply), then takes the first item of the kind the question asks: a code of 1-6 letters
    and digits holding a digit (``read``; e.g. ``B42``), an integer (``count``,
    ``arithmetic``; thousands commas dropped), else the first line. Never raises.
    """
    text = text or ""
    hits = re.findall(r"answer\s*(?:[:=]|\bis\b)\s*([^\n]*)", text, flags=re.IGNORECASE)
    hits = [h for h in hits if h.strip()]
    body = hits[-1] if hits else text
    if qtype == "read":
        m = _CODE.search(body)
        return m.group() if m else None
    if qtype in ("count", "arithmetic"):
        m = _INT.search(body)
        return m.group().replace(",", "") if m else None
    line = next((ln.strip() for ln in body.splitlines() if ln.strip()), "")
    return line.strip(" \t\"'`*").rstrip(".").strip() or None


def evidence_options(ledger: list[Evidence], qtype: str | None) -> tuple[str, ...]:
    """Answers the evidence offers for a choice, in ledger order, distinct.

    OCR codes for ``read``; the digit runs of OCR texts (the 42 of a label ``B42``, the 1284 of
    ``1,284``) and calculator values for ``count`` and ``arithmetic``; nothing for other types.
    """
    out: list[str] = []
    for e in ledger:
        for it in e.output.items:
            texts = [str(it["text"])] if "text" in it else []
            if "value" in it and qtype != "read":
                v = float(it["value"])
                texts.append(str(int(v)) if v.is_integer() else str(v))
            for t in texts:
                if qtype == "read":  # a whole OCR text that is a code, not a part of one
                    found = [t.strip()] if _CODE.fullmatch(t.strip()) else []
                else:
                    found = [m.group().replace(",", "") for m in _DIGITS.finditer(t)]
                out.extend(v for v in found if v not in out)
    return tuple(out) if qtype in ("read", "count", "arithmetic") else ()
