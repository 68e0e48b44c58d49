import numpy as np
import pytest
import torch
from torch.nn import functional as nnf

from easylens import ScanGenerator, auroc, tag_precision_recall, tiny_clip_adapter, train_tiny_clip
from easylens.synthetic import TinyCLIP, TinyTokenizer, reports
from easylens.synthetic.tinyclip import BlobFilterBank, local_loss


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


def test_mean_pooled_tiny_clip_head_and_adapter():
    model = TinyCLIP(width=16, depth=2, heads=2, embed_dim=16, pool="mean").eval()
    images = ScanGenerator(seed=2).sample(3, "subtle").images
    with torch.no_grad():
        tokens = model.encode_tokens(images)
        g = model.encode_image(images)
        torch.testing.assert_close(g, model.to_joint(tokens[:, 1:]).mean(1))
        torch.testing.assert_close(
            tiny_clip_adapter(model).encode_image(images), g, atol=1e-6, rtol=0
        )
    with pytest.raises(ValueError, match="pool must be 'cls' or 'mean'"):
        TinyCLIP(pool="max")


def test_local_loss_rewards_one_lesion_patch_and_quiet_normals():
    texts = nnf.normalize(torch.tensor([[1.0, 0.0], [0.0, 1.0]]), dim=-1)  # 0 lesion, 1 normal
    lesion_like, normal_like = texts[0], texts[1]
    good = torch.stack([normal_like.repeat(4, 1), normal_like.repeat(4, 1)])
    good[1, 2] = lesion_like  # image 1 (a lesion image) has one lesion patch
    bad = torch.stack([normal_like.repeat(4, 1), normal_like.repeat(4, 1)])
    bad[0, 2] = lesion_like  # the lesion patch sits in the normal image
    y, scale = torch.tensor([0.0, 1.0]), torch.tensor(10.0)
    assert local_loss(good, texts, y, 1, scale) < 0.01 < local_loss(bad, texts, y, 1, scale)


def test_train_tiny_clip_with_mean_pool_and_local_loss_is_cached(tmp_path):
    kw = dict(n_train=16, steps=2, batch_size=8, pool="mean", local_weight=1.0, cache_dir=tmp_path)
    model, _ = train_tiny_clip(**kw)
    again, _ = train_tiny_clip(**kw)
    assert model.pool == "mean"
    assert len(list(tmp_path.iterdir())) == 1
    for k, v in model.state_dict().items():
        assert torch.equal(v, again.state_dict()[k])


def test_blob_filter_bank_is_fixed_local_and_the_default_world_unchanged():
    bank = BlobFilterBank()
    img = torch.zeros(1, 1, 32, 32)
    img[0, 0, 13, 22] = 1.0  # a 1 px bright blob inside patch (3, 5)
    pm = BlobFilterBank.patch_max(bank(img), 4)
    assert pm.shape == (1, bank.channels - 1, 8, 8)
    assert not list(bank.parameters())
    fine = pm[0, 0]  # the finest bright-blob channel peaks in the blob's patch
    assert fine.argmax().item() == 3 * 8 + 5
    assert fine[3, 5] > 5 * fine.flatten().sort()[0][-2]
    model = TinyCLIP(width=16, depth=2, heads=2, embed_dim=16, filter_bank="dog_max").eval()
    with torch.no_grad():
        assert tiny_clip_adapter(model).encode_image(img).shape == (1, 16)
    default = TinyCLIP(width=16, depth=2, heads=2, embed_dim=16)  # the spec's world: no new keys
    assert default.filters is None
    assert default.max_embed is None
    assert not [k for k in default.state_dict() if "filters" in k or "max_embed" in k]
    with pytest.raises(ValueError, match="filter_bank must be one of"):
        TinyCLIP(filter_bank="gabor")
    for sigmas, ratio in (((0.5, float("nan")), 1.6), ((0.5,), float("inf")), ((0.5, -1.0), 1.6)):
        with pytest.raises(ValueError, match="finite and positive"):
            BlobFilterBank(sigmas, ratio)
