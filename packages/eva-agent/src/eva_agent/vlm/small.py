"""Small-model steps (``constrained=True``) shared by HFVLM and OpenAIVLM.

A ~135M model cannot write EVA's JSON tool calls or reliably one answer line, so its steps ask
for as little free text as possible: the next step (a tool name or ``"answer"``) and enum tool
arguments are choices, and so is every answer whose space is known (yes/no, colour, shape,
count, spatial, a code OCR found); only the rest is a short continuation of a forced
``Answer:``, read tolerantly. A back-end supplies :meth:`SmallModelSteps.choose` (log-probability
of each option: ``HFVLM`` scores every option; ``OpenAIVLM`` reads the first token's
``top_logprobs``, else the reply's text) and :meth:`SmallModelSteps.continue_answer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eva_agent._vocab import COLOURS, SHAPES
from eva_agent.types import Evidence, Final, ToolCall
from eva_agent.vlm.base import (
    ANSWER_OPTION,
    ANSWER_PREFIX,
    evidence_options,
    extract_open_answer,
    small_answer_prompt,
    small_arg_prompt,
    small_plan_prompt,
)
from eva_agent.world.questions import parse_question
from methodkit.llm import first_line

_COUNTS = tuple(str(k) for k in range(13))
#: Answer options of the questions whose answer is a choice (form -> options).
CHOICE_ANSWERS: dict[str, tuple[str, ...]] = {
    "exists": ("yes", "no"),
    "colour_of": tuple(COLOURS),
    "shape_of": tuple(SHAPES),
    # counts are a small known space too (ShapeTextVQA scenes hold 3-9 shapes)
    "count_colour": _COUNTS,
    "count_shape": _COUNTS,
    "count_all": _COUNTS,
}


class SmallModelSteps:
    """Plan and answer steps for small models over ``choose`` and ``continue_answer``."""

    n_choices: int
    n_fallbacks: int

    def choose(self, prompt: str, options: Sequence[str], prefix: str = "") -> tuple[str, float]:
        """The likeliest option as the reply to ``prompt`` (after ``prefix``) and its share."""
        raise NotImplementedError

    def continue_answer(self, prompt: str, max_new_tokens: int = 8) -> tuple[str, float]:
        """The model's continuation of a reply forced to start with ``Answer:``."""
        raise NotImplementedError

    def small_answer(self, question: str, evidence: list[Evidence] | None) -> tuple[str, float]:
        """A small model's answer: a choice where the answer space is known, else a short line.

        yes/no, colour, shape and count questions pick among their options; spatial ones pick a
        colour, then a shape after it; read questions pick among the codes OCR found (when it
        found any). The rest (sums, reads without OCR evidence) continue a forced ``Answer:``,
        read by :func:`~eva_agent.vlm.base.extract_open_answer`; a reply with no answer of the
        right kind falls back to a choice among the evidence's numbers or codes (counted in
        ``n_fallbacks``).
        """
        parsed = parse_question(question) or {}
        form, qtype = parsed.get("form"), parsed.get("qtype")
        prompt = small_answer_prompt(question, evidence)
        if form in CHOICE_ANSWERS:
            return self.choose(prompt, CHOICE_ANSWERS[form])
        if form == "left_of":
            colour, p_c = self.choose(prompt, tuple(COLOURS))
            shape, p_s = self.choose(prompt, tuple(f" {s}" for s in SHAPES), prefix=colour)
            return f"{colour} {shape.strip()}", p_c * p_s
        found = evidence_options(evidence or [], qtype)
        if qtype == "read" and found:
            return self.choose(prompt, found)
        text, conf = self.continue_answer(prompt)
        answer = extract_open_answer(f"{ANSWER_PREFIX}{text}", qtype)
        if answer is not None:
            return answer, conf
        self.n_fallbacks += 1
        if found:
            return self.choose(prompt, found)
        return first_line(text), conf

    def small_plan(
        self,
        question: str,
        ledger: list[Evidence],
        feedback: dict[str, Any] | None,
        tools: list[dict[str, Any]],
    ) -> ToolCall | Final:
        """The next step chosen among the tools and ``"answer"``; enum arguments likewise."""
        names = [t["name"] for t in tools]
        step, _ = self.choose(
            small_plan_prompt(question, ledger, tools, feedback), [*names, ANSWER_OPTION]
        )
        if step == ANSWER_OPTION:
            return Final(self.small_answer(question, ledger)[0])
        schema = next(t for t in tools if t["name"] == step).get("schema") or {}
        args = {}
        for arg, spec in (schema.get("properties") or {}).items():
            if isinstance(spec, dict) and spec.get("enum"):
                value, _ = self.choose(
                    small_arg_prompt(question, step, arg), [*map(str, spec["enum"]), "any"]
                )
                if value != "any":
                    args[arg] = value
        return ToolCall(step, args)
