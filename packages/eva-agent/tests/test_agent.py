import numpy as np
import pytest
from PIL import Image

from eva_agent import (
    EVAgent,
    IterativeReplanner,
    ShapeColorDetector,
    ShapeTextVQA,
    SimParams,
    SimulatedVLM,
    ThresholdRouter,
)
from eva_agent.baselines import AlwaysTool, Debate, Direct, NoVerify, SelfReflect, SingleShotTool
from eva_agent.metrics import is_correct
from eva_agent.tools import Calculator, RapidOCRTool, ToolCache
from eva_agent.types import Final, ToolCall


@pytest.fixture(scope="module")
def items():
    return list(ShapeTextVQA(24, seed=0))


@pytest.fixture(scope="module")
def tools():
    cache = ToolCache()
    return [cache.wrap(ShapeColorDetector()), cache.wrap(RapidOCRTool()), Calculator()]


def test_perfect_simulator_eva_equals_direct_equals_truth(items, tools):
    pytest.importorskip("rapidocr_onnxruntime")
    vlm = SimulatedVLM(SimParams.perfect(), seed=0)
    for it in items[:12]:
        d = Direct(vlm).run(it.image, it.question)
        e = EVAgent(vlm, tools, ThresholdRouter(0.0)).run(it.image, it.question, it.qtype)
        assert e.route == "slow"
        assert is_correct(d.answer, it.answer, it.qtype), it.question
        assert is_correct(e.answer, it.answer, it.qtype), (it.question, e.log)


def test_tau_one_is_direct_and_tau_zero_is_always_tool(items, tools):
    vlm = SimulatedVLM(seed=3)
    for it in items:
        fast = EVAgent(vlm, tools, ThresholdRouter(1.0)).run(it.image, it.question, it.qtype)
        assert fast.n_tool_calls == 0
        assert fast.route == "fast"
        assert fast.answer == Direct(vlm).run(it.image, it.question).answer
    for it in items[:12]:
        slow = EVAgent(vlm, tools, ThresholdRouter(0.0)).run(it.image, it.question, it.qtype)
        always = AlwaysTool(vlm, tools).run(it.image, it.question, it.qtype)
        assert slow.answer == always.answer
        assert slow.n_tool_calls == always.n_tool_calls
        assert [e.tool for e in slow.ledger] == [e.tool for e in always.ledger]


def test_rounds_and_budget_are_never_exceeded(items, tools):
    vlm = SimulatedVLM(SimParams(wrong_tool=0.6, wrong_region=0.4, fix=0.0), seed=1)
    for budget in (1, 2, 6):
        agent = AlwaysTool(vlm, tools, budget=budget)
        for it in items[:12]:
            res = agent.run(it.image, it.question, it.qtype)
            assert res.n_tool_calls == len(res.ledger) <= budget
            assert max((e.round for e in res.ledger), default=0) <= 4  # R=3 + one ECV round
            assert [e.round for e in res.ledger] == sorted(e.round for e in res.ledger)


def test_ablations_and_baselines_run(items, tools):
    vlm = SimulatedVLM(seed=2)
    it = items[3]  # a read question
    assert it.qtype == "read"
    ss = SingleShotTool(vlm, tools, ThresholdRouter(0.0)).run(it.image, it.question, it.qtype)
    assert ss.n_tool_calls <= 1
    nv = NoVerify(vlm, tools, ThresholdRouter(0.0)).run(it.image, it.question, it.qtype)
    assert nv.verdict is None
    assert Debate(vlm).run(it.image, it.question).n_vlm_calls == 6
    assert SelfReflect(vlm).run(it.image, it.question).n_vlm_calls == 3


def test_ecv_repairs_evidence_neglect(items, tools):
    """With the prior always winning, ECV still outputs the evidence's answer."""
    vlm = SimulatedVLM(
        SimParams(
            neglect=1.0,
            neglect_evidence_first=1.0,
            wrong_tool=0,
            wrong_region=0,
            count_base=0,
            count_drop=0,
        ),
        seed=0,
    )
    it = next(i for i in items if i.qtype == "count")
    assert not is_correct(Direct(vlm).run(it.image, it.question).answer, it.answer, "count")
    res = AlwaysTool(vlm, tools).run(it.image, it.question, it.qtype)
    assert is_correct(res.answer, it.answer, "count")
    assert res.verdict.label == "supported"
    off = NoVerify(vlm, tools, ThresholdRouter(0.0)).run(it.image, it.question, it.qtype)
    assert not is_correct(off.answer, it.answer, "count")


class BadPlanner:
    def __init__(self, step):
        self.step = step

    def answer(self, image, question, evidence=None, *, hints=None, sample=0):
        return "2", 0.5

    def plan(self, image, question, ledger, feedback=None, *, hints=None):
        if callable(self.step):
            return self.step()
        return self.step if not ledger else Final("2")


def test_bad_inputs(items, tools):
    vlm = SimulatedVLM(seed=0)
    agent = EVAgent(vlm, tools)
    it = items[0]
    with pytest.raises(TypeError, match="image must be a PIL image"):
        agent.run("not an image", it.question)
    with pytest.raises(ValueError, match="zero size"):
        agent.run(np.zeros((0, 5, 3), np.uint8), it.question)
    with pytest.raises(ValueError, match="question is empty"):
        agent.run(it.image, "   ")
    with pytest.raises(ValueError, match="no tool named 'ocr2'"):
        agent.call_tool("ocr2", it.image)
    with pytest.raises(ValueError, match=r"max_rounds must be an int in \[1, inf\)"):
        IterativeReplanner(max_rounds=0)
    with pytest.raises(ValueError, match=r"tau must be in \[0\.0, 1\.0\]"):
        ThresholdRouter(tau=1.5)
    with pytest.raises(ValueError, match="qtype must be one of"):
        agent.run(it.image, it.question, "colour")
    with pytest.raises(ValueError, match="two tools are named"):
        EVAgent(vlm, [ShapeColorDetector(), ShapeColorDetector()])
    with pytest.raises(ValueError, match="SimulatedVLM answers ShapeTextVQA"):
        vlm.answer(Image.new("RGB", (4, 4)), it.question)


def test_unknown_tool_and_outside_region_become_error_observations(items, tools):
    it = items[2]
    res = AlwaysTool(BadPlanner(ToolCall("nope", {})), tools).run(it.image, it.question)
    assert res.ledger[0].status == "error"
    assert "no tool named 'nope'" in res.ledger[0].output.diagnosis
    res = AlwaysTool(BadPlanner(ToolCall("rapidocr", {"region": [900, 900, 990, 990]})), tools).run(
        it.image, it.question
    )
    assert res.ledger[0].status == "error"
    assert "outside" in res.ledger[0].output.diagnosis
    with pytest.warns(UserWarning, match="clipped"):
        obs = EVAgent(SimulatedVLM(), tools).tools["detect"](it.image, region=[-20, -20, 100, 100])
    assert obs.status == "ok"


def test_parse_failure_becomes_an_observation(items, tools):
    from eva_agent.vlm import ReplyParseError

    def boom():
        raise ReplyParseError("after one repair retry: no JSON object")

    res = AlwaysTool(BadPlanner(boom), tools).run(items[2].image, items[2].question)
    assert res.ledger[0].tool == "(parse)"
    assert res.ledger[0].status == "error"
    assert "repair retry" in res.ledger[0].output.diagnosis
