"""Issue 41: float images are scaled, every bad input gives an error naming the argument."""

import sys

import numpy as np
import pytest
from PIL import Image, ImageDraw

from eva_agent import (
    CropZoom,
    EVAgent,
    EvidenceVerifier,
    LogisticRouter,
    RapidOCRTool,
    ShapeColorDetector,
    SimParams,
    TesseractTool,
    ThresholdRouter,
    calibrate_tau,
)
from eva_agent.metrics import (
    accuracy_by_type,
    evidence_consistency,
    hallucination_rate,
    tool_call_rate,
)
from eva_agent.types import AgentResult, QAItem
from eva_agent.world import ShapeTextVQA

NAN, INF = float("nan"), float("inf")


def _scene():
    img = Image.new("RGB", (100, 100), "white")
    ImageDraw.Draw(img).rectangle([20, 20, 60, 60], fill=(220, 40, 40))
    return img


UINT8 = np.asarray(_scene())


class FastVLM:
    """Answers at once with full confidence (the fast path: only the image check runs)."""

    def answer(self, image, question, evidence=None, *, hints=None, sample=0):
        return "yes", 1.0

    def plan(self, *args, **kwargs):
        raise AssertionError("the fast path never plans")


@pytest.fixture
def agent():
    return EVAgent(FastVLM(), [ShapeColorDetector()], ThresholdRouter(1.0))


def test_float_image_in_unit_range_is_scaled_not_blackened(agent):
    # the issue: astype("uint8") turned a [0, 1] float image into an all-black one
    as_float = UINT8.astype(np.float32) / 255.0
    det = ShapeColorDetector()
    assert det.detect(as_float) == det.detect(UINT8) != []
    assert agent.run(as_float, "is there a red square?").answer == "yes"
    gray = UINT8[..., 0].astype(np.float64) / 255.0  # (H, W) float grey
    assert np.asarray(CropZoom()(gray, scale=1).items[0]["image"])[0, 0].tolist() == [255] * 3


@pytest.mark.parametrize(
    ("image", "err", "match"),
    [
        (np.where(UINT8 > 128, NAN, UINT8 / 255.0), ValueError, "image contains .* NaN or inf"),
        (np.full((8, 8, 3), INF), ValueError, "image contains 192 NaN or infinite"),
        (UINT8.astype(np.float64), ValueError, r"a float image must be in \[0, 1\]"),
        (UINT8 / 255.0 - 0.5, ValueError, r"a float image must be in \[0, 1\]"),
        (UINT8.astype(np.int64) * 4, ValueError, r"an integer image must be in \[0, 255\]"),
        (UINT8 > 128, TypeError, "image is a boolean mask"),
        (UINT8.transpose(2, 0, 1), ValueError, "looks channels-first"),
        (UINT8[..., :2], ValueError, r"shape \(H, W\) or \(H, W, C\)"),
        (UINT8[None], ValueError, r"shape \(H, W\) or \(H, W, C\)"),
        (np.zeros((0, 0, 3), np.uint8), ValueError, "zero size"),
        (None, TypeError, "image must be a PIL image or an"),
        ("img.png", TypeError, "image must be a PIL image or an"),
        (UINT8.astype(complex), TypeError, "numeric array"),
    ],
)
def test_bad_images(agent, image, err, match):
    with pytest.raises(err, match=match):
        agent.run(image, "is there a red square?")


def test_tools_see_the_same_image_checks():
    # a tool called directly raises; inside the agent the error becomes an observation
    with pytest.raises(ValueError, match="NaN"):
        ShapeColorDetector().detect(np.full((8, 8, 3), NAN))
    obs = CropZoom()(np.full((8, 8, 3), NAN))
    assert obs.status == "error"
    assert "NaN" in obs.diagnosis


def test_agent_config(agent):
    with pytest.raises(TypeError, match="tools must be a list of tools"):
        EVAgent(FastVLM(), CropZoom())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"risks": [0.1, NAN], "target_rate": 0.5}, "risks contains 1 NaN"),
        ({"risks": [0.1, 1.5], "target_rate": 0.5}, r"risks must lie in \[0, 1\]"),
        (
            {"risks": [0.1, 0.2], "fast_correct": [1, 0], "slow_correct": [1, 1], "lam": NAN},
            "lam must be finite and in",
        ),
        (
            {"risks": [0.1, 0.2], "fast_correct": [NAN, 0], "slow_correct": [1, 1]},
            "fast_correct contains 1 NaN",
        ),
        (
            {
                "risks": [0.1, 0.2],
                "fast_correct": [1, 0],
                "slow_correct": [1, 1],
                "slow_calls": [3],
            },
            "lengths differ",
        ),
    ],
)
def test_calibrate_tau_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        calibrate_tau(**kwargs)


def test_logistic_router_bad_input():
    pytest.importorskip("sklearn")
    with pytest.raises(ValueError, match=r"C \(inverse regularisation strength\) must be > 0"):
        LogisticRouter(C=-1.0)
    with pytest.raises(ValueError, match="C must be finite and in"):
        LogisticRouter(C=NAN)
    rows = [{"conf": 0.5, "qtype": "read"}, {"conf": 0.2, "qtype": "count"}]
    with pytest.raises(ValueError, match="1 rows but 2 direct_wrong labels"):
        LogisticRouter().fit(rows[:1], [0, 1])
    with pytest.raises(ValueError, match="rows hold NaN or infinite features"):
        LogisticRouter().fit([{"conf": NAN, "qtype": "read"}, rows[1]], [0, 1])
    with pytest.raises(ValueError, match="direct_wrong must hold 0/1 labels"):
        LogisticRouter().fit(rows, [0, 2])


def test_logistic_router_missing_sklearn_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.linear_model", None)
    with pytest.raises(ImportError, match=r'pip install "eva-agent\[sklearn\]"'):
        LogisticRouter().fit([{"conf": 0.5, "qtype": "read"}], [1])


@pytest.mark.parametrize(
    ("make", "err", "match"),
    [
        (
            lambda: EvidenceVerifier(NAN),
            ValueError,
            r"evidence_conf must be finite and in \[0\.0, 1\.0\]",
        ),
        (lambda: EvidenceVerifier(2.0), ValueError, r"evidence_conf must be in \[0\.0, 1\.0\]"),
        (lambda: ShapeTextVQA(6, seed=NAN), TypeError, "seed must be an int"),
        (lambda: ShapeTextVQA(6, seed=-1), ValueError, r"seed must be an int in \[0, inf\)"),
        (lambda: SimParams(count_free=-1), ValueError, "count_free must be an int >= 0"),
        (lambda: SimParams(conf_correct=(NAN, 1.0)), ValueError, "conf_correct must be two"),
        (
            lambda: ShapeColorDetector(min_area=-5),
            ValueError,
            r"min_area must be an int in \[0, inf\)",
        ),
        (lambda: ShapeColorDetector(min_area=NAN), TypeError, "min_area must be an int"),
        (lambda: ShapeColorDetector(min_sat=300), ValueError, "min_sat is on OpenCV's 0-255"),
        (lambda: RapidOCRTool(min_conf=2.0), ValueError, r"min_conf must be in \[0\.0, 1\.0\]"),
        (lambda: RapidOCRTool(threads=0), ValueError, r"threads must be an int in \[1, inf\)"),
        (lambda: TesseractTool(psm=20), ValueError, "psm must be a Tesseract page-segmentation"),
    ],
)
def test_component_config(make, err, match):
    with pytest.raises(err, match=match):
        make()


def _result(answer="yes"):
    return AgentResult(answer, "fast", [], None, 0, 0.0)


def test_metrics_bad_input():
    items = [QAItem(None, "is there a red square?", "no", "existence")]
    with pytest.raises(ValueError, match="1 items but 2 results"):
        accuracy_by_type(items, [_result(), _result()])
    with pytest.raises(ValueError, match="items is empty"):
        accuracy_by_type([], [])
    with pytest.raises(ValueError, match="0 items but 1 results"):
        hallucination_rate([], [_result()])
    with pytest.raises(ValueError, match="results is empty"):
        tool_call_rate([])
    with pytest.raises(ValueError, match="1 results but 0 ledgers"):
        evidence_consistency(items, [_result()], ledgers=[])
    assert hallucination_rate(items, [_result("yes")]) == 1.0


def test_dataset_progress(monkeypatch):
    import io

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    shown = ShapeTextVQA(12, seed=3, progress=True)
    assert "ShapeTextVQA scenes" in buf.getvalue()
    monkeypatch.setenv("TQDM_DISABLE", "1")
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    quiet = ShapeTextVQA(12, seed=3, progress=True)
    assert buf.getvalue() == ""
    assert [(it.question, it.answer) for it in shown] == [(it.question, it.answer) for it in quiet]
