"""Parse rate of every LLM step of evochamber on SmolLM2-135M-Instruct (issue 42).

Each step's SmallModelPrompts prompt is sent once per task to the real model (greedy, 32
tokens, forced reply prefix as LLMPolicy sends it) and the reply is read the way LLMPolicy
reads it:

- answer, verify, debate, solve_with_plan: the tolerant parser finds one short answer;
- distill, self_reflect: at least one lesson of >= 4 words that is not a copy of the prompt;
- plan, reflect, cross_examine are free text: a non-empty reply.

The end-to-end SmolLM2 run is the ``smollm2`` suite (smollm2_suite.py).
``--quick`` uses a scripted stand-in (no transformers import).
"""

from __future__ import annotations

import argparse
import re
import time
import warnings

from evochamber import (
    DefaultPrompts,
    HFChatModel,
    ScriptedChatModel,
    SmallModelPrompts,
)
from evochamber.policies.llm import (
    extract_answer,
    lesson_lines,
    parse_answer,
    parse_insights,
    reply_text,
    well_formed,
)
from evochamber.policies.prompts import ANSWER_STEPS
from evochamber.stream import ExactMatch, NumericMatch
from methodkit.bench import Outcome, ResultRow, check

TASKS = [
    ("math", "What is 7 + 5?", "12"),
    ("facts", "What is the capital of France? Answer with one word.", "Paris"),
    ("math", "What is 9 - 3?", "6"),
    ("facts", "What colour is a clear daytime sky? Answer with one word.", "blue"),
    ("math", "What is 4 + 4?", "8"),
    ("facts", "What is the capital of Spain? Answer with one word.", "Madrid"),
    ("math", "What is 10 - 7?", "3"),
    ("facts", "How many legs does a dog have? Answer with a number.", "4"),
    ("math", "What is 2 + 6?", "8"),
    ("facts", "What colour is snow? Answer with one word.", "white"),
    ("math", "What is 5 + 3?", "8"),
    ("facts", "What is the opposite of hot? Answer with one word.", "cold"),
]
MARKER = re.compile(r"answer\s*[:=]\s*\S", re.IGNORECASE)
LESSON = re.compile(r"lesson\s*\d*\s*[:=]\s*\S", re.IGNORECASE)
STEPS = ("answer", "verify", "debate", "solve_with_plan", "plan", "reflect", "cross_examine",
         "distill", "self_reflect")  # fmt: skip


def _fill(prompts: object, step: str, task: str) -> str:
    return getattr(prompts, step).format(
        task=task, answer="5", peers="- 5\n- 6", plan="add the numbers", team_answer="5",
        feedback="the team answer was wrong", reflections="- a1: I added wrongly.",
        critique="a1 is right", m=2,
    )  # fmt: skip


def _own_lesson(lesson: str, prompt: str) -> bool:
    """A lesson of >= 4 words that is not a template placeholder or a copy of the prompt."""
    body = lesson.strip()
    return len(body.split()) >= 4 and "<" not in body and body.lower() not in prompt.lower()


def _parsed(step: str, text: str, prompt: str) -> bool:
    """Whether LLMPolicy's parsers find what the step asks for in ``text`` (prefix joined)."""
    if step in ANSWER_STEPS:  # one short answer, in a form the tolerant parser knows
        return well_formed(extract_answer(text))
    if step in ("distill", "self_reflect"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lessons = parse_insights(text, 2) if step == "distill" else lesson_lines(text)
        if step == "self_reflect" and not LESSON.search(prompt):  # a free-text lesson
            lessons = [{"text": text}]
        return any(_own_lesson(str(d["text"]), prompt) for d in lessons)
    return bool(text.strip())


def ask(chat: object, prompts: DefaultPrompts, step: str, task: str, max_tokens: int) -> str:
    """One step's reply the way LLMPolicy sends and reads it (forced prefix included)."""
    prefix = prompts.prefix(step)
    msgs = [{"role": "system", "content": "You are agent a1, a careful problem solver."},
            {"role": "user", "content": _fill(prompts, step, task)}]  # fmt: skip
    if prefix:
        msgs.append({"role": "assistant", "content": prefix})
    if step in ANSWER_STEPS and prompts.answer_max_tokens is not None:
        max_tokens = min(max_tokens, prompts.answer_max_tokens)
    return reply_text(step, prefix, chat.chat(msgs, max_tokens=max_tokens)[0].text)


def step_rates(
    chat: object, n_tasks: int, labels: tuple[str, ...] = ("default", "small")
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]], list[dict]]:
    """Parse rate per (prompt set, step) over the first ``n_tasks`` tasks.

    Also the rate of the literal ``Answer:`` marker with an answer after it (the measure of
    the first SmolLM2 record) and, for the answering steps, the accuracy of the parsed answer.
    """
    sets = {"default": DefaultPrompts(), "small": SmallModelPrompts()}
    rates: dict[str, dict[str, float]] = {}
    extra: dict[str, dict[str, float]] = {}
    examples = []
    for label in labels:
        prompts = sets[label]
        rates[label] = {}
        for step in STEPS:
            ok = marker = right = 0
            for k, (niche, prompt, truth) in enumerate(TASKS[:n_tasks]):
                text = ask(chat, prompts, step, prompt, 32)
                ok += _parsed(step, text, _fill(prompts, step, prompt))
                if step in ANSWER_STEPS:
                    marker += bool(MARKER.search(text))
                    checker = (NumericMatch if niche == "math" else ExactMatch)(truth)
                    right += bool(checker(parse_answer(text)))
                if k < 2:
                    examples.append({"prompts": label, "step": step, "reply": text[:120]})
            rates[label][step] = ok / n_tasks
            if step in ANSWER_STEPS:
                extra[f"{label}:{step}"] = {
                    "marker_rate": marker / n_tasks,
                    "answer_accuracy": right / n_tasks,
                }
    return rates, extra, examples


#: SmallModelPrompts' rates in the first SmolLM2 record (commit 057c62b; answering steps: the
#: literal "Answer:" marker; distill: a lesson; small self_reflect: a "Lesson:" line).
BEFORE = {"answer": 0.417, "verify": 0.417, "debate": 0.083, "solve_with_plan": 0.333,
          "plan": 1.0, "reflect": 1.0, "cross_examine": 1.0, "distill": 0.083,
          "self_reflect": 0.0}  # fmt: skip


def smollm2_parse(args: argparse.Namespace) -> Outcome:
    """Per-step parse rates of SmallModelPrompts on SmolLM2 (the end-to-end run: ``smollm2``)."""
    if args.quick:
        chat, model = ScriptedChatModel(["Answer: 12\nLesson: add."]), "scripted stand-in"
    else:
        from methodkit.smollm2 import load_smollm2

        chat, model = HFChatModel(*load_smollm2()), "SmolLM2-135M-Instruct"
    n = 3 if args.quick else len(TASKS)
    t0 = time.perf_counter()
    rates, extra, examples = step_rates(chat, n, ("small",))
    step_secs = time.perf_counter() - t0
    rows = [
        ResultRow.from_values(f"{label}:{step}", "parse_rate", [v], True)
        for label, per in rates.items()
        for step, v in per.items()
    ]
    worst = min(rates["small"].values())
    claims = [
        check(
            "SmolLM2 with SmallModelPrompts: every LLM step parses at a rate >= 0.9",
            worst >= 0.9,
            ", ".join(f"{s} {v:.2f}" for s, v in rates["small"].items()),
            inputs=[worst],
            degenerate=bool(args.quick),
        )
    ]
    config = {
        "model": model,
        "tasks": n,
        "max_tokens": 32,
        "decoding": "greedy",
        "step_seconds": step_secs,
        "parse": "answering steps: the tolerant parser (extract_answer) finds one answer of at "
        "most 6 words; distill and self_reflect: >= 1 lesson (JSON list or 'Lesson:' lines) of "
        ">= 4 words that is not a copy of the prompt or a '<placeholder>'; plan, reflect, "
        "cross_examine: a non-empty reply. The forced prefixes ('Answer:', 'Lesson: When') are "
        "part of the text read",
        "rates": rates,
        "answer_steps": extra,
        "before": {
            "record": "smollm2_parse at 057c62b (old SmallModelPrompts, no forced prefix)",
            "rates": BEFORE,
        },
        "scale": "SmallModelPrompts only (DefaultPrompts: see the 057c62b record); the "
        "end-to-end run is the smollm2 suite",
        "examples": examples,
    }
    return Outcome(config, rows, claims, seeds=args.seeds[:1])
