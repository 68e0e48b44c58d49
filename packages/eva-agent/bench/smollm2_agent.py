"""EVA end to end with SmolLM2-135M-Instruct as planner AND reasoner (issue 42).

The planner is ``HFVLM(constrained=True)``: the next step (a tool name or "answer") and the
detector's colour/shape arguments are chosen by log-probability, so every plan step parses;
choice questions (yes/no, colour, shape) are answered the same way, open ones from a few-shot
prompt's first line. The image side runs on the offline tools (detector, OCR, crop, calc).
Reported as it comes out: the parse rate of each LLM step, accuracy, seconds and tokens per
question; beside it the old free-text JSON planner's parse rate on the same first plan step.
"""

from __future__ import annotations

import argparse
import re
import time

from tasks import make_tools

from eva_agent import HFVLM, AlwaysSlow, EVAgent, ShapeTextVQA
from eva_agent.metrics import is_correct
from eva_agent.tools import ToolCache
from eva_agent.types import Final, ToolCall
from eva_agent.vlm import ReplyParseError
from eva_agent.vlm.hf import CHOICE_ANSWERS
from methodkit.bench import Outcome, ResultRow, check

WELL_FORMED = {
    "count": r"^\d+$",
    "arithmetic": r"^-?\d+$",
    "read": r"^[A-Za-z0-9]{1,6}$",
    "spatial": r"^[a-z]+ [a-z]+$",  # colour and shape, e.g. "purple circle"
    "attribute": r"^[a-z]+$",  # chosen by log-probability
    "existence": r"^(yes|no)$",  # chosen by log-probability
}


class Counting:
    """Wraps an HFVLM and records each plan and answer step's reply for the parse rates."""

    def __init__(self, vlm: HFVLM) -> None:
        self.vlm, self.plans, self.answers = vlm, [], []

    def answer(self, image, question, evidence=None, *, hints=None, sample=0):  # noqa: ANN001, ANN201
        out = self.vlm.answer(image, question, evidence, hints=hints, sample=sample)
        self.answers.append((question, out[0]))
        return out

    def plan(self, image, question, ledger, feedback=None, *, hints=None):  # noqa: ANN001, ANN201
        step = self.vlm.plan(image, question, ledger, feedback, hints=hints)
        self.plans.append(step)
        return step

    def judge(self, question, answer, ledger):  # noqa: ANN001, ANN201
        return self.vlm.judge(question, answer, ledger)


def old_planner_rate(vlm: HFVLM, items: list, tools: list) -> float:
    """Parse rate of the free-text JSON planner (plan_prompt, one repair retry), first step."""
    hints = {"tools": [{"name": t.name, "kind": t.kind, "schema": t.schema} for t in tools]}
    ok = 0
    for it in items:
        try:
            vlm.plan(None, it.question, [], hints=hints)
            ok += 1
        except ReplyParseError:
            pass
    return ok / len(items)


def smollm2_agent(args: argparse.Namespace) -> Outcome:
    """SmolLM2 as EVA's planner and reasoner on ShapeTextVQA questions, offline tools."""
    from methodkit import smollm2

    n = 4 if args.quick else 12
    items = list(ShapeTextVQA(24, seed=100, split="test"))[:n]
    model, tok = smollm2.tiny_smollm2() if args.quick else smollm2.load_smollm2()
    name = "tiny_smollm2 (random weights, quick)" if args.quick else "SmolLM2-135M-Instruct"
    tools = make_tools(ToolCache())
    vlm = HFVLM(model, tok, max_new_tokens=8, constrained=True)
    t0 = time.perf_counter()
    old_rate = old_planner_rate(HFVLM(model, tok, text_only=True), items, tools)
    old_secs = time.perf_counter() - t0
    rec = Counting(vlm)
    agent = EVAgent(rec, tools, AlwaysSlow())
    t0 = time.perf_counter()
    results = [agent.run(it.image, it.question, it.qtype) for it in items]
    secs = time.perf_counter() - t0
    ok = [is_correct(r.answer, it.answer, it.qtype) for r, it in zip(results, items, strict=True)]
    qtypes = {it.question: it.qtype for it in items}
    formed = [bool(re.match(WELL_FORMED.get(qtypes[q], r".+"), a)) for q, a in rec.answers]
    plan_ok = [isinstance(s, ToolCall | Final) for s in rec.plans]
    values = {
        "planner_parse_rate": sum(plan_ok) / max(1, len(plan_ok)),
        "reasoner_parse_rate": sum(formed) / max(1, len(formed)),
        "old_json_planner_parse_rate": old_rate,
        "accuracy": sum(ok) / n,
        "seconds_per_question": secs / n,
        "generated_tokens_per_question": vlm.n_generated / n,
        "choices_per_question": vlm.n_choices / n,
        "tool_calls_per_question": sum(r.n_tool_calls for r in results) / n,
    }
    rows = [ResultRow.from_values("eva+smollm2", k, [v], None) for k, v in values.items()]
    worst = min(values["planner_parse_rate"], values["reasoner_parse_rate"])
    claim = check(
        "SmolLM2 as planner and reasoner: both LLM steps parse at a rate >= 0.9",
        worst >= 0.9,
        f"planner {values['planner_parse_rate']:.2f} ({len(plan_ok)} steps), reasoner "
        f"{values['reasoner_parse_rate']:.2f} ({len(formed)} answers); free-text JSON planner "
        f"{old_rate:.2f}",
        inputs=[worst],
        degenerate=bool(args.quick) or not plan_ok,
    )
    config = {
        "model": name,
        "n_questions": n,
        "router": "AlwaysSlow (every question takes the tool path)",
        "choice_answers": sorted(CHOICE_ANSWERS),
        "old_planner_seconds": old_secs,
        "examples": [
            {
                "q": it.question,
                "truth": it.answer,
                "answer": r.answer,
                "tools": [e.tool for e in r.ledger],
            }
            for it, r in zip(items, results, strict=True)
        ][:8],
    }
    return Outcome(config, rows, [claim], seeds=[100])
