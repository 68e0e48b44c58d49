import hashlib

import numpy as np
import pytest

from eva_agent._vocab import QTYPES
from eva_agent.world import ShapeTextVQA, label_box, render_scene, sample_scene, shape_box
from reference import boxes_overlap, truth_reference


def _hash(img):
    return hashlib.sha256(img.tobytes()).hexdigest()


def test_render_is_deterministic_per_seed():
    a = render_scene(sample_scene(np.random.default_rng(5), 0.7))
    b = render_scene(sample_scene(np.random.default_rng(5), 0.7))
    c = render_scene(sample_scene(np.random.default_rng(6), 0.7))
    assert _hash(a) == _hash(b) != _hash(c)
    assert a.size == (480, 320)
    assert a.mode == "RGB"


def test_ground_truth_matches_an_independent_function():
    ds = ShapeTextVQA(300, seed=3)
    for it in ds:
        assert truth_reference(it.image.info["eva_scene"], it.question) == it.answer


def test_label_boxes_inside_and_not_overlapping():
    rng = np.random.default_rng(0)
    for _ in range(60):
        spec = sample_scene(rng, 1.0)
        boxes = [label_box(s) for s in spec["shapes"]] + [shape_box(s) for s in spec["shapes"]]
        for b in boxes:
            assert 0 <= b[0] < b[2] <= spec["width"]
            assert 0 <= b[1] < b[3] <= spec["height"]
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                assert not boxes_overlap(boxes[i], boxes[j])


def test_dataset_is_balanced_and_deterministic():
    ds = ShapeTextVQA(60, seed=1)
    assert [sum(it.qtype == t for it in ds) for t in QTYPES] == [10] * 6
    ds2 = ShapeTextVQA(60, seed=1)
    assert [it.question for it in ds] == [it.question for it in ds2]
    ex = [it for it in ShapeTextVQA(600, seed=0) if it.qtype == "existence"]
    assert 0.35 < np.mean([it.answer == "no" for it in ex]) < 0.65  # 50 % absent, 5 SE


def test_dataset_bad_input():
    with pytest.raises(ValueError, match="split must be one of"):
        ShapeTextVQA(12, split="dev")
    with pytest.raises(ValueError, match=r"n must be an int in \[6, inf\)"):
        ShapeTextVQA(3)
    with pytest.raises(ValueError, match="difficulty must be in"):
        ShapeTextVQA(12, difficulty=2)
