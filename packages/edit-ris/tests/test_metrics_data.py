"""Metrics against hand-computed values and brute force; the procedural world's guarantees."""

import numpy as np
import pytest

from edit_ris import ShapeRefGenerator, iou, miou, oiou, precision_at
from edit_ris.data.shapes import resolve
from edit_ris.probe import auroc, fisher_ratio
from reference import auroc_reference, iou_reference


def test_miou_and_oiou_differ_on_a_hand_example():
    pred = np.zeros((2, 4, 4), bool)
    gt = np.zeros((2, 4, 4), bool)
    gt[0, :, :] = True  # large object, 16 px, predicted half: IoU 0.5
    pred[0, :2, :] = True
    gt[1, 0, 0] = True  # small object, 1 px, missed: IoU 0
    assert iou(pred, gt).tolist() == [0.5, 0.0]
    assert miou(pred, gt) == 0.25
    assert oiou(pred, gt) == pytest.approx(8 / 17)
    assert precision_at(pred, gt, (0.4, 0.5)) == {0.4: 0.5, 0.5: 0.0}


def test_empty_conventions():
    z = np.zeros((1, 3, 3), bool)
    g = z.copy()
    g[0, 1, 1] = True
    assert iou(z, g).tolist() == [0.0]  # empty prediction of a real object
    assert iou(z, z).tolist() == [1.0]  # empty GT and empty prediction: 1 (documented)


def test_iou_matches_brute_force():
    rng = np.random.default_rng(0)
    p, g = rng.random((5, 6, 6)) > 0.5, rng.random((5, 6, 6)) > 0.6
    np.testing.assert_allclose(iou(p, g), [iou_reference(a, b) for a, b in zip(p, g, strict=True)])


def test_auroc_and_fisher():
    rng = np.random.default_rng(1)
    s, y = np.round(rng.normal(size=40), 1), rng.random(40) > 0.5
    assert auroc(s, y) == pytest.approx(auroc_reference(s, y))
    assert fisher_ratio(np.array([0.0, 0, 2, 2, 1, 1]), np.array([1, 1, 0, 0, 0, 0], bool)) == (
        pytest.approx(1.5**2 / (0 + 0.25), rel=1e-6)
    )


@pytest.mark.parametrize("split", ["attr", "size", "spatial"])
def test_every_expression_is_unique_to_its_referent(split):
    for it in ShapeRefGenerator(seed=3).sample(40, split=split, edit="mixed"):
        assert it.mask.any()
        assert it.expression.startswith("the ")
        assert it.edit_instruction.split(" ", 2)[0] in ("make", "remove")
    gen = ShapeRefGenerator(seed=4)
    for _ in range(20):
        objs, t, desc = next(s for s in iter(lambda: gen._scene(split), 0) if s is not None)
        assert resolve(objs, desc) == [t]


def test_recolour_edit_changes_only_the_referent():
    for it in ShapeRefGenerator(seed=5).sample(10, "attr", edit="purple"):
        changed = np.abs(it.edited_image - it.image).max(0) > 1e-6
        assert not changed[~it.mask].any()
        assert changed[it.mask].mean() > 0.9
        assert it.edit_instruction.endswith(" purple")


def test_size_split_plants_a_same_colour_shape_pair():
    for it in ShapeRefGenerator(seed=6).sample(10, "size"):
        o = it.objects[it.target]
        pairs = [
            (p, q)
            for p in it.objects
            for q in it.objects
            if p.shape == q.shape and p.colour == q.colour and p.size != q.size
        ]
        assert pairs  # every size scene has a small/large pair of one colour and shape
        assert it.expression == f"the {o.size} {o.colour} {o.shape}"
