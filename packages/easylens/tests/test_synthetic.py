import numpy as np
import torch

from easylens import ScanGenerator, auroc, tag_precision_recall
from easylens.synthetic import TinyTokenizer, reports


def test_subtle_lesions_inside_the_lung_and_masks_consistent():
    batch = ScanGenerator(seed=3).sample(40, "subtle")
    assert batch.images.shape == (40, 1, 32, 32)
    assert float(batch.images.min()) >= 0
    assert float(batch.images.max()) <= 1
    assert batch.pixel_mask.flatten(1).any(1).all()
    assert not (batch.pixel_mask & ~batch.lung_mask).any()
    pm = batch.patch_mask(4)
    up = pm.repeat_interleave(4, 1).repeat_interleave(4, 2)
    assert not (batch.pixel_mask & ~up).any()  # every lesion pixel lies in a lesion patch
    for b in range(40):  # every lesion patch holds a lesion pixel
        for y, x in pm[b].nonzero().tolist():
            assert batch.pixel_mask[b, 4 * y : 4 * y + 4, 4 * x : 4 * x + 4].any()
    assert pm.flatten(1).sum(1).float().mean() <= 2.5  # about one patch


def test_generator_is_seeded_and_normals_have_no_mask():
    a, b = ScanGenerator(seed=1).sample(3, "obvious"), ScanGenerator(seed=1).sample(3, "obvious")
    assert torch.equal(a.images, b.images)
    n = ScanGenerator(seed=1).sample(3)
    assert not n.pixel_mask.any()
    assert n.labels.tolist() == [0, 0, 0]
    assert reports(n)[0] == "normal chest scan with no lesion"
    assert TinyTokenizer()(reports(a)).shape == (3, 14)


def test_lesion_is_locally_visible_in_the_subtle_regime():
    gen = ScanGenerator(seed=4)
    sub = gen.sample(30, "subtle")
    inside = (sub.images[:, 0] * sub.pixel_mask).sum((1, 2)) / sub.pixel_mask.sum((1, 2))
    ring = sub.lung_mask & ~sub.pixel_mask
    around = (sub.images[:, 0] * ring).sum((1, 2)) / ring.sum((1, 2))
    assert float((inside - around).mean()) > 0.05


def test_metrics():
    assert auroc(np.array([0, 0, 1, 1]), np.array([0.1, 0.2, 0.3, 0.4])) == 1.0
    sel = torch.tensor([[True, False], [True, False]])
    gt = torch.tensor([[True, True], [False, False]])
    assert tag_precision_recall(sel, gt) == (0.5, 0.5)
