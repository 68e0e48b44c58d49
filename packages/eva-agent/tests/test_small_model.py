"""HFVLM(constrained=True): choices by log-probability, few-shot prompts (tiny_smollm2)."""

import math

import pytest

from eva_agent import HFVLM, OpenAIVLM, ShapeColorDetector
from eva_agent.types import Evidence, Final, Observation, ToolCall
from eva_agent.vlm.base import (
    evidence_options,
    extract_open_answer,
    small_answer_prompt,
    small_plan_prompt,
)
from eva_agent.vlm.hf import CHOICE_ANSWERS
from eva_agent.vlm.openai_compat import first_token_scores
from methodkit.testing import LoopbackChatServer

TOOLS = [{"name": "detect", "kind": "detect", "schema": ShapeColorDetector.schema},
         {"name": "rapidocr", "kind": "ocr", "schema": {}}]  # fmt: skip


def test_small_prompts_end_on_the_answer_slot():
    plan = small_plan_prompt("How many stars are there?", [], TOOLS, None)
    assert plan.endswith("Evidence: (no evidence yet)\nNext:")
    assert "detect, rapidocr, answer" in plan
    assert small_answer_prompt("Is there a red star?", None).endswith(
        "Question: Is there a red star?\nAnswer:"
    )


@pytest.fixture(scope="module")
def vlm():
    pytest.importorskip("transformers")
    from methodkit.smollm2 import tiny_smollm2

    return HFVLM(*tiny_smollm2(), constrained=True)


@pytest.mark.slow
def test_constrained_steps_always_parse(vlm):
    step = vlm.plan(None, "How many red shapes are there?", [], hints={"tools": TOOLS})
    assert isinstance(step, ToolCall | Final)
    if isinstance(step, ToolCall):
        assert step.name in ("detect", "rapidocr")
        assert set(step.args) <= {"color", "shape", "region"}
    # a tool: the step, then one per enum argument (detect); "answer": the step, then the
    # count chosen among 0..12
    plan_choices = {"detect": 3, "rapidocr": 1}.get(getattr(step, "name", None), 2)
    assert vlm.n_choices == plan_choices
    text, conf = vlm.answer(None, "Is there a red star?")
    assert text in ("yes", "no")
    assert 0.5 <= conf <= 1.0
    colour, conf = vlm.answer(None, "What colour is the star?")
    assert colour in CHOICE_ANSWERS["colour_of"]
    assert 1 / len(CHOICE_ANSWERS["colour_of"]) <= conf <= 1.0
    assert vlm.n_choices == plan_choices + 2


@pytest.mark.slow
def test_choose_follows_the_scores(vlm, monkeypatch):
    import methodkit.smollm2 as sm

    monkeypatch.setattr(sm, "score_options", lambda m, t, msgs, opts, prefix="": [-3.0, -1.0, -2.0])
    option, p = vlm.choose("Pick.", ["a", "b", "c"])
    assert option == "b"
    assert p == pytest.approx(1 / (math.exp(-2) + 1 + math.exp(-1)))


# Open replies SmolLM2-135M-Instruct gave as EVA's reasoner (committed smollm2_agent record),
# and what the tolerant reader must take from each (None: no answer of the asked kind).
OPEN_REPLIES = [
    ("Answer: Z76", "read", "Z76"),
    (" K7\n\nEvidence: detect found", "read", "K7"),
    ("Answer: The code is B42.", "read", "B42"),
    ("The code is a hexadecimal", "read", None),
    ("Answer: 108", "arithmetic", "108"),
    ("Answer: 1,284 kg", "arithmetic", "1284"),
    ("The answer is 12 because", "arithmetic", "12"),
    ("You are an AI assistant designed to support", "arithmetic", None),
    ("Answer: 3.5", "arithmetic", None),
    ("Answer: -4", "arithmetic", "-4"),
    ("Answer: 4 shapes", "count", "4"),
    ("Answer: red circle.", "spatial", "red circle"),
    ("", "read", None),
    (None, "count", None),
]


@pytest.mark.parametrize(("reply", "qtype", "want"), OPEN_REPLIES)
def test_open_answers_are_read_tolerantly(reply, qtype, want):
    assert extract_open_answer(reply, qtype) == want


def test_evidence_options_offer_the_codes_and_numbers_of_the_ledger():
    ocr = Observation("ok", [{"text": "B42", "conf": 0.9, "box": [0, 0, 5, 5]},
                             {"text": "TOTAL 1,284 kg", "conf": 0.9, "box": [0, 9, 5, 14]},
                             {"text": "B42", "conf": 0.8, "box": [9, 0, 14, 5]}])  # fmt: skip
    calc = Observation("ok", [{"value": 57.0}])
    ledger = [Evidence("rapidocr", {}, ocr, 0.9, None, 1, kind="ocr"),
              Evidence("calc", {"expr": "12+45"}, calc, 1.0, None, 2, kind="calc")]  # fmt: skip
    assert evidence_options(ledger, "read") == ("B42",)
    assert evidence_options(ledger, "arithmetic") == ("42", "1284", "57")
    assert evidence_options(ledger, "attribute") == ()
    assert evidence_options([], "read") == ()


@pytest.mark.slow
def test_every_small_answer_is_well_formed_on_tiny_smollm2(vlm):
    import re

    pattern = {"count": r"^\d+$", "spatial": r"^[a-z]+ [a-z]+$", "read": r"^[A-Za-z0-9]{1,6}$",
               "arithmetic": r"^-?\d+$"}  # fmt: skip
    questions = [("How many red shapes are there?", "count"),
                 ("Which shape is nearest to the left of the red square?", "spatial"),
                 ("What code is written under the blue circle?", "read"),
                 ("What is the sum of the numbers under the stars?", "arithmetic")]  # fmt: skip
    ocr = Observation("ok", [{"text": "K7", "conf": 0.9, "box": [0, 0, 5, 5]},
                             {"text": "31", "conf": 0.9, "box": [0, 9, 5, 14]}])  # fmt: skip
    ledger = [Evidence("rapidocr", {}, ocr, 0.9, None, 1, kind="ocr")]
    for q, qtype in questions:
        for ev in (None, ledger):
            text, conf = vlm.answer(None, q, ev)
            # random weights: a generated reply may hold no answer; then it is chosen among
            # the evidence's codes/numbers, and without evidence it may stay ill-formed
            if qtype in ("count", "spatial") or ev is not None:
                assert re.match(pattern[qtype], text), (q, text)
            assert 0.0 <= conf <= 1.0


def test_first_token_scores_read_the_top_logprobs():
    alts = [{"token": " re", "logprob": -0.5}, {"token": " blue", "logprob": -1.0},
            {"token": "1", "logprob": -2.0}]  # fmt: skip
    choice = {"logprobs": {"content": [{"token": " re", "logprob": -0.5, "top_logprobs": alts}]}}
    scores = first_token_scores(choice, ["red", "blue", "green", "10", "11"])
    assert scores == {"red": -0.5, "blue": -1.0, "10": -2.0, "11": -2.0}
    assert first_token_scores({"logprobs": None}, ["red"]) == {}


def test_openai_vlm_constrained_steps_over_loopback():
    def reply(messages):
        last = messages[-1]
        if last["role"] == "assistant":  # the forced "Answer:" of an open answer
            return " 1,284 kg"
        text = last["content"]
        if "Pick the next step" in text:
            return "detect"
        if "should look for color:" in text.rsplit("\n", 1)[-1]:
            return "red"
        if "should look for shape:" in text.rsplit("\n", 1)[-1]:
            return "any shape"
        return "I think blue."

    extra = {"continue_final_message": True, "add_generation_prompt": False}
    with LoopbackChatServer(reply) as srv:
        vlm = OpenAIVLM(srv.url, "m", constrained=True, prefill_extra=extra)
        step = vlm.plan(None, "How many red shapes are there?", [], hints={"tools": TOOLS})
        assert step == ToolCall("detect", {"color": "red"})
        assert vlm.answer(None, "What colour is the star?") == ("blue", 1.0)
        answer, conf = vlm.answer(None, "What is the sum of the numbers under the stars?")
        assert answer == "1284"
        assert 0.0 <= conf <= 1.0
    last = srv.bodies[-1]
    assert last["messages"][-1] == {"role": "assistant", "content": "Answer:"}
    assert last["continue_final_message"] is True
    assert "continue_final_message" not in srv.bodies[0]  # no prefix, no extra fields
    assert vlm.n_choices == 4  # step, color, shape, colour answer
    assert vlm.n_fallbacks == 0
    with pytest.raises(TypeError, match="prefill_extra must be a mapping"):
        OpenAIVLM(srv.url, "m", constrained=True, prefill_extra=["continue_final_message"])
