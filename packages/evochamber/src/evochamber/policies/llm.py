"""LLMPolicy: the engine's policy over a chat model (transformers or any OpenAI-compatible API)."""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from evochamber.agent import Agent
from evochamber.backends.base import ChatResult
from evochamber.policies.base import BasePolicy, StepContext
from evochamber.policies.prompts import ANSWER_STEPS, DefaultPrompts
from evochamber.types import (
    INSIGHT_KINDS,
    Insight,
    Reflection,
    Structure,
    Task,
    TeamOutcome,
    normalize_answer,
)

_MARKER = re.compile(
    r"(?:\banswer\b(?:\s+(?:to|for|of)\b[^:=\n]{0,60}?)?\s*(?:[:=]|\bis\b)"
    r"|\bso\s+it\s+is\b|\bresult\s+is\b)\s*[:=]?\s*(.+)",
    re.IGNORECASE,
)
_NUMBER = r"-?\d+(?:[.,]\d+)?"
_EQUALS = re.compile(rf"=\s*({_NUMBER})\s*\.?\s*$")
_TRIM = " \t\"'`*_"
_UNFINISHED = re.compile(r"[-+*/=(,:]\s*$")  # a line cut off by the token budget
#: Longest reply taken as a bare answer line (words).
MAX_ANSWER_WORDS = 6


def _clean(answer: str) -> str:
    answer = answer.strip().strip(_TRIM)
    answer = re.split(r"(?<=\w)[.!?](?:\s|$)|\s+(?:because|since|as)\s", answer, maxsplit=1)[0]
    return answer.strip(_TRIM).rstrip(".!?,;").strip(_TRIM)


def extract_answer(text: str | None) -> str | None:
    """The answer a reply states, or ``None`` when it states none in a form we know.

    Tolerant, for small models; tried in order on the reply:

    1. the last ``Answer: X`` / ``answer = X`` / ``The (final) answer (to ...) is X`` /
       ``result is X`` (case-insensitive; an ``Answer:`` forced before the reply counts);
    2. the last line, when it is short (at most :data:`MAX_ANSWER_WORDS` words, e.g. a bare
       number or word; a list number is dropped) and not cut off after an operator;
    3. the number after the last ``=`` of an equation line (``7 + 5 = 12``).

    The answer is cut at the first sentence end or ``because``, and stripped of quotes,
    markdown emphasis and a trailing full stop. Never raises.
    """
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for line in reversed(lines):
        hits = _MARKER.findall(line)
        if hits:
            inner = hits[-1]
            while _MARKER.search(inner):  # "Answer: Answer: 12" (a prefix the model repeated)
                inner = _MARKER.findall(inner)[-1]
            answer = _clean(inner)
            if answer:
                return answer
    last = re.sub(r"^\d+[.)]\s+", "", lines[-1]) if lines else ""  # a list item's number
    if last and len(last.split()) <= MAX_ANSWER_WORDS and not _UNFINISHED.search(last):
        eq = _EQUALS.search(last)
        answer = eq.group(1) if eq else _clean(last)
        if answer:
            return answer
    for line in reversed(lines):
        eq = _EQUALS.search(line)
        if eq:
            return eq.group(1)
    return None


def parse_answer(text: str | None) -> str:
    """:func:`extract_answer`, else the last non-empty line, else ``""`` (fails safe)."""
    found = extract_answer(text)
    if found is not None:
        return found
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def well_formed(answer: str | None) -> bool:
    """Whether an extracted answer is one short answer (1..:data:`MAX_ANSWER_WORDS` words)."""
    return bool(answer) and len(str(answer).split()) <= MAX_ANSWER_WORDS


def reply_text(step: str, prefix: str, reply: str) -> str:
    """The text a step's parser reads: the forced prefix joined to the reply.

    For an answering step whose first line now states an answer, that line alone (a small
    model may go on with a made-up next example after it).
    """
    text = join_prefill(prefix, reply or "")
    if prefix and step in ANSWER_STEPS:
        head = next((ln for ln in text.splitlines() if ln.strip()), "")
        if extract_answer(head):
            return head
    return text


def join_prefill(prefix: str, reply: str) -> str:
    """The whole answer text of a call whose reply was forced to start with ``prefix``.

    A back-end that continued the prefix returns only the continuation; one that ignored it
    (a fresh reply) may repeat it: the prefix is then not doubled.
    """
    if not prefix:
        return reply
    if reply.lstrip().lower().startswith(prefix.strip().lower()):
        return reply.lstrip()
    sep = "" if reply[:1].isspace() else " "
    return f"{prefix}{sep}{reply}"


_LESSON = re.compile(r"^\s*(?:[-*\d.)\s]*)?lesson\s*\d*\s*[:=]\s*(.+)$", re.IGNORECASE | re.M)
_KIND = re.compile(r"^(?:\((strategy|pitfall|check)\)|(strategy|pitfall|check)\s*:)\s*", re.I)


def lesson_lines(text: str) -> list[dict[str, Any]]:
    """Every ``Lesson: <text>`` line (numbered, bulleted, kind-tagged allowed) as a dict."""
    out = []
    for hit in _LESSON.findall(text or ""):
        body = hit.strip().strip("\"'` ")
        kind = _KIND.match(body)
        if kind:
            body = body[kind.end() :].strip()
        if body:
            tag = (kind.group(1) or kind.group(2)).lower() if kind else "strategy"
            out.append({"text": body, "kind": tag})
    return out


def parse_insights(text: str, m: int) -> list[dict[str, Any]]:
    """The lessons in a distill reply: a JSON list of objects, else ``Lesson: ...`` lines.

    Tolerant, for small models: the first ``[...]`` span that parses as a JSON list of
    ``{"text": ...}`` objects wins; otherwise every line ``Lesson: <text>`` (optionally
    numbered or bulleted, optionally ``(pitfall)`` / ``(check)`` tagged) is a lesson. Warns and
    returns ``[]`` when neither is there; malformed JSON entries are skipped with a warning.
    """
    start, end = (text or "").find("["), (text or "").rfind("]")
    data: Any = None
    if 0 <= start < end:
        try:
            data = json.loads(text[start : end + 1])
        except ValueError:
            data = None
    if not isinstance(data, list):
        lines = lesson_lines(text)
        if not lines:
            warnings.warn(
                "distill reply holds neither a JSON list of lessons nor 'Lesson:' lines, "
                f"skipped: {(text or '')[:80]!r}",
                stacklevel=3,
            )
        return lines[:m]
    out = []
    for d in data:
        if isinstance(d, dict) and isinstance(d.get("text"), str) and d["text"].strip():
            out.append(d)
        else:
            warnings.warn(f"malformed lesson skipped: {d!r}", stacklevel=3)
    return out[:m]


class LLMPolicy(BasePolicy):
    """Agents as system prompts + retrieved insights over one shared chat model.

    Args:
        chat: A :class:`~evochamber.backends.ChatModel`.
        prompts: The templates (:class:`DefaultPrompts`).
        answer_parser: ``text -> answer`` (default :func:`parse_answer`, which fails safe).
        max_tokens: Completion budget per call.
        temperature: Sampling temperature of answers (0: greedy).
        max_insights: ``m`` of the distill prompt.
    """

    def __init__(
        self,
        chat: Any,
        prompts: DefaultPrompts | None = None,
        answer_parser: Callable[[str], str] = parse_answer,
        max_tokens: int = 256,
        temperature: float = 0.0,
        max_insights: int = 2,
    ) -> None:
        super().__init__()
        self.chat, self.prompts = chat, prompts or DefaultPrompts()
        self.parse = answer_parser
        self.max_tokens, self.temperature, self.max_insights = max_tokens, temperature, max_insights
        self._n = 0

    def messages(
        self, agent: Agent, user: str, ctx: StepContext, niche: str | None, step: str
    ) -> list[dict[str, str]]:
        """The chat messages of one step: system (+ retrieved insights), user, forced prefix."""
        system = agent.system_prompt
        if niche is not None:
            items = agent.archive.retrieve(niche, ctx.retrieve_r, ctx.t)
            if items:
                lines = "\n".join(f"- ({it.kind}) {it.text}" for it in items)
                system += "\n\n" + self.prompts.insights.format(items=lines)
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        prefix = self.prompts.prefix(step)
        if prefix:  # the reply is forced to start with it (see DefaultPrompts.answer_prefix)
            msgs.append({"role": "assistant", "content": prefix})
        return msgs

    def _call(
        self, agent: Agent, user: str, ctx: StepContext, niche: str | None = None, *, step: str
    ) -> str:
        prefix = self.prompts.prefix(step)
        budget = self.max_tokens
        if step in ANSWER_STEPS and self.prompts.answer_max_tokens is not None:
            budget = min(budget, self.prompts.answer_max_tokens)
        res: list[ChatResult] = self.chat.chat(
            self.messages(agent, user, ctx, niche, step), n=1, temperature=self.temperature,
            max_tokens=budget, seed=int(ctx.rng.integers(2**31)),
        )  # fmt: skip
        if not res:
            raise ValueError("the chat back-end returned zero choices")
        self.calls += 1
        self.tokens += res[0].prompt_tokens + res[0].completion_tokens
        return reply_text(step, prefix, res[0].text)

    def solve(
        self, team: Sequence[Agent], structure: Structure, task: Task, ctx: StepContext
    ) -> TeamOutcome:
        """The team's answer to ``task`` under ``structure``."""
        calls0, tokens0, p, k = self.calls, self.tokens, self.prompts, task.niche
        ask = p.answer.format(task=task.prompt)
        if structure is Structure.SOLO_VERIFY or len(team) == 1:
            first = self.parse(self._call(team[0], ask, ctx, k, step="answer"))
            final = self.parse(
                self._call(
                    team[0], p.verify.format(task=task.prompt, answer=first), ctx, k, step="verify"
                )
            )
            answers = {team[0].agent_id: final or first}
            final = final or first
        elif structure is Structure.PIPELINE:
            plan = self._call(team[0], p.plan.format(task=task.prompt), ctx, k, step="plan")
            solver = team[1]
            ans = self.parse(
                self._call(
                    solver,
                    p.solve_with_plan.format(task=task.prompt, plan=plan),
                    ctx,
                    k,
                    step="solve_with_plan",
                )
            )
            checker = team[2] if len(team) > 2 else team[0]
            final = (
                self.parse(
                    self._call(
                        checker,
                        p.verify.format(task=task.prompt, answer=ans),
                        ctx,
                        k,
                        step="verify",
                    )
                )
                or ans
            )
            answers = {a.agent_id: final for a in team}
        else:
            answers = {
                a.agent_id: self.parse(self._call(a, ask, ctx, k, step="answer")) for a in team
            }
            if structure is Structure.DEBATE:
                round1 = dict(answers)
                for a in team:
                    peers = "\n".join(f"- {v}" for aid, v in round1.items() if aid != a.agent_id)
                    msg = p.debate.format(task=task.prompt, peers=peers, answer=round1[a.agent_id])
                    answers[a.agent_id] = self.parse(self._call(a, msg, ctx, k, step="debate"))
            final = _majority([answers[a.agent_id] for a in team])
        success = task.check(final) if task.check else None
        correct = {aid: bool(task.check(v)) for aid, v in answers.items()} if task.check else {}
        norm = {normalize_answer(v) for v in answers.values()}
        return TeamOutcome(
            final, answers, success, len(norm) > 1, self.calls - calls0, correct,
            self.tokens - tokens0,
        )  # fmt: skip

    @staticmethod
    def _feedback(outcome: TeamOutcome) -> str:
        if outcome.success is None:
            return "unknown (no checker); the team disagreed"
        return "the team answer was correct" if outcome.success else "the team answer was wrong"

    def reflect(
        self, agent: Agent, task: Task, outcome: TeamOutcome, ctx: StepContext
    ) -> Reflection:
        """CoDream phase (ii): one member's reflection on its own step."""
        msg = self.prompts.reflect.format(
            task=task.prompt, answer=outcome.member_answers.get(agent.agent_id, "(none)"),
            team_answer=outcome.answer, feedback=self._feedback(outcome),
        )  # fmt: skip
        return Reflection(agent.agent_id, self._call(agent, msg, ctx, step="reflect"))

    def cross_examine(
        self,
        team: Sequence[Agent],
        task: Task,
        outcome: TeamOutcome,
        reflections: list[Reflection],
        ctx: StepContext,
    ) -> str:
        """CoDream phase (iii): the team cross-examines the reflections."""
        text = "\n".join(f"- {r.agent_id}: {r.text}" for r in reflections)
        return self._call(
            team[0],
            self.prompts.cross_examine.format(task=task.prompt, reflections=text),
            ctx,
            step="cross_examine",
        )

    def distill(
        self,
        team: Sequence[Agent],
        task: Task,
        outcome: TeamOutcome,
        reflections: list[Reflection],
        critique: Any,
        ctx: StepContext,
    ) -> list[Insight]:
        """CoDream phase (iv): at most ``m`` insights tagged with the task's niche."""
        text = "\n".join(f"- {r.agent_id}: {r.text}" for r in reflections)
        msg = self.prompts.distill.format(
            task=task.prompt, reflections=text, critique=critique, m=self.max_insights
        )
        out = []
        for d in parse_insights(self._call(team[0], msg, ctx, step="distill"), self.max_insights):
            kind = str(d["kind"]) if d.get("kind") in INSIGHT_KINDS else "strategy"
            try:
                q = min(1.0, max(0.0, float(d.get("quality", 0.5))))
            except (TypeError, ValueError):
                q = 0.5
            out.append(self._insight(task, d["text"].strip(), kind, q, ctx.t, "codream"))
        return out

    def self_reflect(
        self, agent: Agent, task: Task, outcome: TeamOutcome, ctx: StepContext
    ) -> list[Insight]:
        """Private reflection of one agent after a failure (no CoDream)."""
        msg = self.prompts.self_reflect.format(
            task=task.prompt, answer=outcome.member_answers.get(agent.agent_id, "(none)"),
            feedback=self._feedback(outcome),
        )  # fmt: skip
        text = self._call(agent, msg, ctx, step="self_reflect").strip()
        lessons = lesson_lines(text)
        text = lessons[0]["text"] if lessons else text
        return (
            [self._insight(task, text, "strategy", 0.5, ctx.t, f"self:{agent.agent_id}")]
            if text
            else []
        )

    def _insight(
        self, task: Task, text: str, kind: str, quality: float, t: int, source: str
    ) -> Insight:
        self._n += 1
        return Insight(f"L{self._n}", task.niche or "", text[:500], kind, source, t, quality)


def _majority(answers: Sequence[str]) -> str:
    norm = [normalize_answer(a) for a in answers]
    counts = Counter(norm)
    top = max(counts.values())
    return next(a for a, n in zip(answers, norm, strict=True) if counts[n] == top)
