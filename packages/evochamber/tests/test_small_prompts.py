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
from evochamber.policies.llm import (
    extract_answer,
    join_prefill,
    parse_answer,
    parse_insights,
    reply_text,
    well_formed,
)
from evochamber.policies.prompts import ANSWER_STEPS
from evochamber.stream import ExactMatch


def _fields(template):
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def test_small_prompts_keep_every_placeholder_of_the_defaults():
    small, default = SmallModelPrompts(), DefaultPrompts()
    for name in DefaultPrompts.__dataclass_fields__:
        if isinstance(getattr(default, name), str) and not name.endswith("_prefix"):
            assert _fields(getattr(small, name)) <= _fields(getattr(default, name)) | {"m"}, name
    for name in ANSWER_STEPS:
        assert "Answer: <" in getattr(small, name)
        assert "{task}" in getattr(small, name)
        assert small.prefix(name) == "Answer:"
        assert default.prefix(name) == ""
    assert small.prefix("distill") == small.prefix("self_reflect") == "Lesson: When"
    assert small.prefix("plan") == ""


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


# Replies SmolLM2-135M-Instruct gave in the committed smollm2_parse records, and the answer the
# tolerant parser must read from each (None: no answer in a form it knows).
CANNED = [
    ("7 + 5 = 12.\n\nThe answer is 12.", "12"),
    ("7 + 5 = 12\n\nCorrect answer: 5", "5"),
    ("The answer to this question is 7.", "7"),
    ("Plan: Add.\nAnswer: 7", "7"),
    ("Answer: 11", "11"),
    ("Answer: Answer: 12", "12"),
    ("answer = 7", "7"),
    ("The final answer is **Paris**.", "Paris"),
    ("Answer: 4, because a dog has four legs", "4"),
    ("Answer: blue. The sky is blue.", "blue"),
    ("Madrid", "Madrid"),
    ("  12  \n", "12"),
    ("I think so.\n7 + 5 = 12", "12"),
    ("1. 7 + 5 = 12\n2. 12 + 1 = 13\n3. 13 +", "13"),
    ("Answer: 3.5", "3.5"),
    ("Answer: -1", "-1"),
    ("To solve this problem, I'll break it down into manageable parts. First, I'll identify", None),
    ("", None),
    (None, None),
    ("Answer:", None),
]


@pytest.mark.parametrize(("reply", "want"), CANNED)
def test_tolerant_parser_on_canned_small_model_replies(reply, want):
    assert extract_answer(reply) == want
    if want is not None:
        assert parse_answer(reply) == want
        assert well_formed(want)


def test_parse_answer_falls_back_to_the_last_line_and_never_raises():
    long = "To solve this problem, I'll break it down into manageable parts. First, I'll identify"
    assert parse_answer(long) == long
    assert parse_answer("") == parse_answer(None) == ""
    assert not well_formed("")
    assert not well_formed(None)
    assert not well_formed("a clear daytime sky is a colour")


def test_forced_prefix_is_joined_once_and_the_answer_line_kept():
    assert join_prefill("Answer:", " 12") == "Answer: 12"
    assert join_prefill("Answer:", "12") == "Answer: 12"
    assert join_prefill("Answer:", "Answer: 12") == "Answer: 12"  # the server answered anew
    assert join_prefill("", "hi") == "hi"
    # a small model goes on with a made-up example after its answer: the first line counts
    assert reply_text("answer", "Answer:", " 12\n\nTask: What is 1 + 1?\nAnswer: 2") == (
        "Answer: 12"
    )
    assert reply_text("distill", "Lesson: When", " adding, carry.\nLesson: x") == (
        "Lesson: When adding, carry.\nLesson: x"
    )
    assert parse_answer(reply_text("verify", "Answer:", "\nThe answer is 7.")) == "7"


def test_small_prompts_drive_a_step_and_lessons_reach_the_archives():
    seen = []

    def reply(messages):
        seen.append(messages[-1])
        text = messages[-1]["content"]
        return " adding, carry the ten." if text.startswith("Lesson") else " 1"

    pol = LLMPolicy(ScriptedChatModel(reply), prompts=SmallModelPrompts())
    eng = EvoChamber(pol, EvoConfig(n_agents=3, structure="VOTE", lifecycle=False))
    rec = eng.step(Task("t1", "math", "1+1?", check=ExactMatch("2")))
    assert rec["codream"]
    assert rec["insights"] == 1
    # every call ends with the forced prefix of its step (an assistant message)
    assert {m["content"] for m in seen if m["role"] == "assistant"} == {"Answer:", "Lesson: When"}
    texts = [it.text for a in eng.population.agents for it in a.archive.items]
    assert "When adding, carry the ten." in texts
