"""SmallModelPrompts (few-shot, one answer line) and the tolerant lesson parser."""

import string

import pytest

from evochamber import (
    DefaultPrompts,
    EvoChamber,
    EvoConfig,
    LLMPolicy,
    ScriptedChatModel,
    SmallModelPrompts,
    Task,
)
from evochamber.policies.llm import parse_answer, parse_insights
from evochamber.stream import ExactMatch


def _fields(template):
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def test_small_prompts_keep_every_placeholder_of_the_defaults():
    small, default = SmallModelPrompts(), DefaultPrompts()
    for name in DefaultPrompts.__dataclass_fields__:
        assert _fields(getattr(small, name)) <= _fields(getattr(default, name)) | {"m"}, name
    for name in ("answer", "verify", "debate", "solve_with_plan"):
        assert "Answer: <" in getattr(small, name)
        assert "{task}" in getattr(small, name)


def test_lesson_lines_parse_when_there_is_no_json():
    text = "Lesson: Check the units.\n2. lesson: (pitfall) do not guess\nsome chatter"
    assert parse_insights(text, 5) == [
        {"text": "Check the units.", "kind": "strategy"},
        {"text": "do not guess", "kind": "pitfall"},
    ]
    assert parse_insights(text, 1) == [{"text": "Check the units.", "kind": "strategy"}]
    with pytest.warns(UserWarning, match="neither a JSON list"):
        assert parse_insights("I have no idea", 2) == []
    ok = parse_insights('[{"text": "add carefully", "kind": "check"}] Lesson: ignored', 2)
    assert ok == [{"text": "add carefully", "kind": "check"}]


def test_answer_marker_parse():
    assert parse_answer("Answer: 12") == "12"
    assert parse_answer("12") == "12"


def test_small_prompts_drive_a_step_and_lessons_reach_the_archives():
    def reply(messages):
        text = messages[-1]["content"]
        return "Lesson: add carefully." if "Lesson:" in text else "Answer: 1"

    pol = LLMPolicy(ScriptedChatModel(reply), prompts=SmallModelPrompts())
    eng = EvoChamber(pol, EvoConfig(n_agents=3, structure="VOTE", lifecycle=False))
    rec = eng.step(Task("t1", "math", "1+1?", check=ExactMatch("2")))
    assert rec["codream"]
    assert rec["insights"] == 1
