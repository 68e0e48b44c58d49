import warnings

import numpy as np
import pytest
from PIL import Image

from eva_agent.tools import (
    Calculator,
    CropZoom,
    RapidOCRTool,
    ShapeColorDetector,
    TesseractTool,
    ToolCache,
    crop_zoom,
    evaluate,
    to_original,
)
from eva_agent.world import label_box, render_scene, sample_scene


def _clean_scene(rng, font=None):
    spec = sample_scene(rng, 0.0)
    for s in spec["shapes"]:
        if font:
            s["font"], s["grey"] = font, False
    return spec, render_scene(spec)


def test_detector_count_equals_truth_on_100_clean_scenes():
    rng = np.random.default_rng(11)
    det = ShapeColorDetector()
    for _ in range(100):
        spec, img = _clean_scene(rng)
        found = sorted((d["color"], d["shape"]) for d in det.detect(img))
        assert found == sorted((s["color"], s["shape"]) for s in spec["shapes"])


def test_detector_filters_and_region():
    spec, img = _clean_scene(np.random.default_rng(2))
    s = spec["shapes"][0]
    obs = ShapeColorDetector()(img, color=s["color"], shape=s["shape"])
    assert [d["label"] for d in obs.items] == [f"{s['color']} {s['shape']}"]
    assert ShapeColorDetector()(img, region=[1000, 1000, 1100, 1100]).status == "error"
    assert ShapeColorDetector()(img, colour="red").status == "error"  # unknown argument


def _read_fraction(n_scenes):
    rng = np.random.default_rng(4)
    ocr = RapidOCRTool()
    ok = total = 0
    for _ in range(n_scenes):
        spec, img = _clean_scene(rng, font=24)
        for s in spec["shapes"]:
            x0, y0, x1, y1 = label_box(s)
            obs = ocr(img, region=[x0 - 8, y0 - 6, x1 + 8, y1 + 6])
            total += 1
            ok += [i["text"].replace(" ", "") for i in obs.items] == [s["label"]]
    return ok / total


def test_rapidocr_reads_24px_labels_quick():
    pytest.importorskip("rapidocr_onnxruntime")
    assert _read_fraction(4) >= 0.9


@pytest.mark.slow
def test_rapidocr_reads_95_percent_of_24px_labels_on_50_scenes():
    pytest.importorskip("rapidocr_onnxruntime")
    assert _read_fraction(50) >= 0.95


def test_ocr_boxes_are_in_original_coordinates():
    pytest.importorskip("rapidocr_onnxruntime")
    spec, img = _clean_scene(np.random.default_rng(8), font=28)
    s = spec["shapes"][0]
    lb = label_box(s)
    obs = RapidOCRTool()(img, region=[lb[0] - 10, lb[1] - 8, lb[2] + 10, lb[3] + 8], scale=3)
    (item,) = obs.items
    cx, cy = (item["box"][0] + item["box"][2]) / 2, (item["box"][1] + item["box"][3]) / 2
    assert lb[0] - 4 <= cx <= lb[2] + 4
    assert lb[1] - 4 <= cy <= lb[3] + 4


def test_ocr_region_outside_is_an_error_and_partial_is_clipped():
    ocr = RapidOCRTool()
    img = Image.new("RGB", (100, 50), "white")
    assert ocr(img, region=[200, 200, 300, 300]).status == "error"
    with pytest.warns(UserWarning, match="clipped"):
        crop_zoom(img, [-10, -10, 40, 40])


def test_tesseract_reads_or_reports_missing():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tool = TesseractTool()
    if not tool.available:
        assert tool(Image.new("RGB", (10, 10))).status == "error"
        pytest.skip("tesseract binary not installed")
    spec, img = _clean_scene(np.random.default_rng(9), font=28)
    s = spec["shapes"][0]
    x0, y0, x1, y1 = label_box(s)
    obs = tool(img, region=[x0 - 10, y0 - 8, x1 + 10, y1 + 8], scale=2)
    assert obs.status == "ok"
    assert obs.items


def test_crop_zoom_maps_back_exactly():
    img = Image.fromarray(np.random.default_rng(0).integers(0, 255, (60, 90, 3), np.uint8))
    crop, offset, scale = crop_zoom(img, [10, 20, 50, 40], 3)
    assert crop.size == (120, 60)
    assert offset == (10, 20)
    assert to_original((0, 0, 120, 60), offset, scale) == (10, 20, 50, 40)
    assert to_original((30, 15, 60, 45), offset, scale) == (20, 25, 30, 35)
    obs = CropZoom()(img, region=[0, 0, 30, 30], scale=2)
    assert obs.items[0]["size"] == [60, 60]
    with pytest.raises(ValueError, match="scale must be in"):
        crop_zoom(img, None, 0.5)


@pytest.mark.parametrize(
    "expr",
    ["__import__('os')", "x + 1", "(1).real", "abs(-1)", "2 ** 8", "[1][0]", "1 if 1 else 2"],
)
def test_calculator_rejects_names_attributes_calls(expr):
    with pytest.raises(ValueError, match=r"not allowed|not an arithmetic"):
        evaluate(expr)
    assert Calculator()(None, expr=expr).status == "error"


def test_calculator_values():
    assert evaluate("17 + 42 + 1,284") == 1343
    assert evaluate("-(3 - 5) * 4 / 2") == 4
    with pytest.raises(ValueError, match="division by zero"):
        evaluate("1/0")


def test_tool_cache_hits_and_round_trips(tmp_path):
    _spec, img = _clean_scene(np.random.default_rng(3))
    cache = ToolCache(tmp_path / "c.json")
    det = cache.wrap(ShapeColorDetector())
    a = det(img, color="red")
    b = det(img, color="red")
    assert (cache.hits, cache.misses) == (1, 1)
    assert a.items == b.items
    cache.save()
    again = ToolCache(tmp_path / "c.json")
    assert again.wrap(ShapeColorDetector())(img, color="red").items == a.items
    assert again.hits == 1
