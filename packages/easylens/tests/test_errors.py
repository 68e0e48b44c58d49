import math

import pytest
import torch

from easylens import (
    EasyAmplifier,
    EasyBank,
    EasyLens,
    EasyTag,
    GenericViTAdapter,
    ScanGenerator,
    ZeroShotDetector,
)
from easylens.synthetic import TinyCLIP, tiny_clip_adapter


def test_images_of_the_wrong_size(tiny, bank):
    with pytest.raises(ValueError, match=r"pixels but the adapter's grid"):
        EasyLens(tiny[1], bank).encode_image(torch.zeros(1, 1, 48, 48))


@pytest.mark.parametrize("layer", [0, 3, 7, -1])
def test_layer_outside_range(tiny, scans, layer):
    with pytest.raises(ValueError, match=r"layer must be in \[1, 2\]"):
        EasyBank.build(tiny[1], scans["normal"].images, scans["lesion"].images, layer=layer)


def test_bank_of_another_backbone_layer_or_width(tiny, bank, scans):
    other = tiny_clip_adapter(TinyCLIP(width=16, depth=3, heads=2, embed_dim=16, seed=5))
    with pytest.raises(ValueError, match="built with backbone"):
        EasyLens(other, bank)
    with pytest.raises(ValueError, match="built at layer 1, but tagging reads layer 2"):
        EasyLens(tiny[1], bank, tag_layer=2)
    with pytest.raises(ValueError, match="built with width 16"):
        EasyTag()(torch.zeros(1, 65, 8), bank)


def test_too_few_normals_or_clusters_and_empty_lesion_source(tiny, scans):
    adapter, normal, lesion = tiny[1], scans["normal"].images, scans["lesion"].images
    with pytest.raises(ValueError, match="at least 4 normal reference images"):
        EasyBank.build(adapter, normal[:6], lesion)
    with pytest.raises(ValueError, match="fewer than n_normal_clusters=1000"):
        EasyBank.build(adapter, normal, lesion, reference="cluster", n_normal_clusters=1000)
    with pytest.raises(ValueError, match="lesion source is empty"):
        EasyBank.build(adapter, normal)


def test_lesion_masks_of_another_shape(tiny, scans):
    with pytest.raises(ValueError, match="lesion_masks have shape"):
        EasyBank.build(
            tiny[1],
            scans["normal"].images,
            scans["lesion"].images,
            lesion_masks=torch.zeros(6, 16, 16, dtype=torch.bool),
        )


def test_nan_in_images_and_tokens(tiny, bank, images):
    bad = images.clone()
    bad[0, 0, 3, 3] = math.nan
    with pytest.raises(ValueError, match="images must be finite"):
        EasyLens(tiny[1], bank).encode_image(bad)
    tok = tiny[1].tokens_at(images, 1)
    tok[0, 5, 0] = math.inf
    with pytest.raises(ValueError, match="tokens must be finite"):
        EasyTag()(tok, bank)


def test_position_reference_on_another_grid(make_bank):
    bank = make_bank(torch.eye(4), torch.ones(1, 4), (2, 2))
    with pytest.raises(ValueError, match=r"grid \(2, 2\) needs 4 patches"):
        EasyTag()(torch.randn(1, 9, 4), bank)


def test_pool_injection_without_to_joint(bank):
    adapter = GenericViTAdapter(
        lambda x: x[:, 0], [torch.nn.Identity()] * 3, lambda t: t[:, 0], (8, 8), 1
    )
    adapter._backbone_id = bank.backbone_id
    with pytest.raises(ValueError, match="inject='pool' needs an adapter with to_joint"):
        EasyLens(adapter, bank, inject="pool")


def test_text_prototypes_without_text_encoder(scans):
    model = TinyCLIP(width=16, depth=3, heads=2, embed_dim=16)
    adapter = GenericViTAdapter(
        model.embed, list(model.blocks), model.head, (8, 8), 1, image_size=(32, 32)
    )
    with pytest.raises(ValueError, match="lesion_texts need an adapter with a text encoder"):
        EasyBank.build(adapter, scans["normal"].images, lesion_texts=["a small nodule"])


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: EasyAmplifier(alpha=-1.0), "alpha must be a finite number >= 0"),
        (lambda: EasyAmplifier(kappa=-0.5), "kappa must be a finite number >= 0"),
        (lambda: EasyTag(threshold=-3.0), "threshold must be a finite number >= 0"),
        (lambda: EasyTag(threshold=math.nan), "threshold must be a finite number >= 0"),
        (lambda: EasyAmplifier(residual="mean"), "residual must be one of"),
        (lambda: EasyTag(max_verify=32), "max_verify must be <= 16"),
        (lambda: ScanGenerator().sample(2, "huge"), "regime must be"),
    ],
)
def test_bad_hyperparameters(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_verify_without_prompts(tiny, bank):
    with pytest.raises(ValueError, match=r"verify=True\) needs prompts"):
        EasyLens(tiny[1], bank, tag=EasyTag(verify=True))


def test_empty_batch(tiny, bank, scans):
    empty = torch.zeros(0, 1, 32, 32)
    with pytest.raises(ValueError, match="images is an empty batch"):
        EasyLens(tiny[1], bank).encode_image(empty)
    with pytest.raises(ValueError, match="images is an empty batch"):
        EasyLens(tiny[1], bank).explain(empty)
    with pytest.raises(ValueError, match="images is an empty batch"):
        EasyBank.build(tiny[1], scans["normal"].images, empty)
    det = ZeroShotDetector(
        tiny[1], ["chest scan with a round lesion in the left lung"], ["normal chest scan"]
    )
    with pytest.raises(ValueError, match="images is an empty batch"):
        det.decision_function(empty)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int64, torch.bool])
def test_integer_images(tiny, bank, images, dtype):
    raw = (images * 255).to(dtype)
    with pytest.raises(TypeError, match=r"images must be a floating-point tensor .* got dtype"):
        EasyLens(tiny[1], bank).encode_image(raw)
    with pytest.raises(TypeError, match="images must be a floating-point tensor"):
        EasyBank.build(tiny[1], raw, images)


def test_wrong_channel_count(tiny, bank, images):
    rgb = images.expand(-1, 3, -1, -1)
    with pytest.raises(ValueError, match=r"images have 3 channel\(s\) .* the encoder takes 1"):
        EasyLens(tiny[1], bank).encode_image(rgb)
    with pytest.raises(ValueError, match=r"have 3 channel\(s\)"):
        tiny[1].tokens_at(rgb, 1)
    model = TinyCLIP(width=16, depth=3, heads=2, embed_dim=16)
    adapter = GenericViTAdapter(model.embed, list(model.blocks), model.head, (8, 8), 1, in_chans=3)
    with pytest.raises(ValueError, match=r"images have 1 channel\(s\) .* takes 3 \(grayscale\?"):
        adapter.encode_image(images)
    with pytest.raises(ValueError, match="in_chans must be an integer >= 1"):
        GenericViTAdapter(model.embed, list(model.blocks), model.head, (8, 8), 1, in_chans=0)


def test_bad_batch_size(tiny, scans):
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        EasyBank.build(tiny[1], scans["normal"].images, scans["lesion"].images, batch_size=0)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        ZeroShotDetector(tiny[1], ["a lesion"], ["normal"], batch_size=0)
