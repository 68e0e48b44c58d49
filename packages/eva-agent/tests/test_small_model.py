"""HFVLM(constrained=True): choices by log-probability, few-shot prompts (tiny_smollm2)."""

import math

import pytest

from eva_agent import HFVLM, ShapeColorDetector
from eva_agent.types import Final, ToolCall
from eva_agent.vlm.base import small_answer_prompt, small_plan_prompt
from eva_agent.vlm.hf import CHOICE_ANSWERS

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
    plan_choices = {"detect": 3, "rapidocr": 1}.get(getattr(step, "name", None), 1)
    assert vlm.n_choices == plan_choices  # the step, then one per enum argument (detect)
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

    monkeypatch.setattr(sm, "score_options", lambda m, t, msgs, opts: [-3.0, -1.0, -2.0])
    option, p = vlm.choose("Pick.", ["a", "b", "c"])
    assert option == "b"
    assert p == pytest.approx(1 / (math.exp(-2) + 1 + math.exp(-1)))
