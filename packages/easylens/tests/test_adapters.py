import pytest
import torch

from easylens import (
    EasyAmplifier,
    EasyBank,
    EasyLens,
    EasyTag,
    HFCLIPAdapter,
    OpenCLIPAdapter,
    TimmViTAdapter,
)


def _check_adapter(adapter, reference_fn, images):
    ref = reference_fn(images)
    torch.testing.assert_close(adapter.encode_image(images), ref, atol=1e-5, rtol=0)
    for layer in range(1, adapter.num_layers):
        tok = adapter.tokens_at(images, layer)
        assert tok.shape[:2] == (len(images), adapter.num_prefix_tokens + adapter.num_patches)
        torch.testing.assert_close(adapter.resume(tok, layer), ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(
        adapter.forward_with_edits(images, {1: lambda x: x}), ref, atol=1e-5, rtol=0
    )


def _lens_smoke(adapter, images):
    gen = torch.Generator().manual_seed(1)
    normal = torch.randn(8, *images.shape[1:], generator=gen)
    lesion = torch.randn(4, *images.shape[1:], generator=gen)
    bank = EasyBank.build(adapter, normal, lesion, layer=1, n_lesion_prototypes=2)
    off = EasyLens(adapter, bank, amplifier=EasyAmplifier(alpha=0.0), tag=EasyTag(calibrated=False))
    torch.testing.assert_close(
        off.encode_image(images), adapter.encode_image(images), atol=1e-5, rtol=0
    )
    on = EasyLens(adapter, bank, tag=EasyTag(calibrated=False))
    assert torch.isfinite(on.encode_image(images)).all()


@pytest.mark.slow  # importing open_clip alone takes ~20 s on a busy machine
def test_open_clip_adapter_reproduces_encode_image():
    open_clip = pytest.importorskip("open_clip")
    torch.manual_seed(0)
    model = open_clip.CLIP(
        embed_dim=16,
        vision_cfg=open_clip.CLIPVisionCfg(
            layers=3, width=32, head_width=16, patch_size=8, image_size=32
        ),
        text_cfg=open_clip.CLIPTextCfg(
            context_length=8, vocab_size=64, width=32, heads=2, layers=1
        ),
    ).eval()

    def tok(texts):
        return torch.randint(0, 64, (len(texts), 8), generator=torch.Generator().manual_seed(0))

    adapter = OpenCLIPAdapter(model, tok)
    images = torch.randn(3, 3, 32, 32)
    _check_adapter(adapter, model.encode_image, images)
    assert adapter.grid_size == (4, 4)
    assert adapter.encode_text(["a", "b"]).shape == (2, 16)
    assert adapter.to_joint(adapter.tokens_at(images, 1)[:, 1:]).shape == (3, 16, 16)
    _lens_smoke(adapter, images)


def test_hf_clip_adapter_reproduces_get_image_features():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.CLIPConfig(
        text_config={
            "hidden_size": 32,
            "intermediate_size": 37,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "vocab_size": 99,
            "max_position_embeddings": 16,
        },
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 37,
            "num_hidden_layers": 3,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 8,
        },
        projection_dim=16,
    )
    model = transformers.CLIPModel(cfg).eval()
    adapter = HFCLIPAdapter(model)
    images = torch.randn(2, 3, 32, 32)

    def ref(x):
        out = model.get_image_features(pixel_values=x)
        return out if isinstance(out, torch.Tensor) else out.pooler_output

    _check_adapter(adapter, ref, images)
    assert adapter.num_prefix_tokens == 1
    assert adapter.grid_size == (4, 4)
    _lens_smoke(adapter, images)


def test_timm_adapter_reproduces_forward():
    pytest.importorskip("timm")
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    model = VisionTransformer(
        img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=2, num_classes=5
    ).eval()
    adapter = TimmViTAdapter(model)
    images = torch.randn(2, 3, 32, 32)
    _check_adapter(adapter, model, images)
    _lens_smoke(adapter, images)
