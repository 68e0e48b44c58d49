"""Tiny weightless timm ViTs: eva0.models.timm_vit, PromptedViT, EVA-0 and FOA on them."""

import pytest
import torch

from eva0 import EVA0
from eva0.baselines import FOA
from eva0.models import PromptedViT, timm_vit

# importing timm (and torchvision) takes 10-30 s on a busy core: these tests are slow ones
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _needs_timm():
    pytest.importorskip("timm")


def _vit(seed=0):
    torch.manual_seed(seed)  # timm initialises from the global generator
    return timm_vit(8, 4, 1, 10, embed_dim=16, depth=2, num_heads=2).eval()


def _x(B=6, seed=1):
    return torch.rand(B, 1, 8, 8, generator=torch.Generator().manual_seed(seed))


def test_timm_vit_is_a_timm_vision_transformer_with_the_config():
    from timm.models.vision_transformer import VisionTransformer

    vit = _vit()
    assert isinstance(vit, VisionTransformer)
    assert vit.patch_embed.num_patches == 4
    assert vit.embed_dim == 16
    assert len(vit.blocks) == 2
    assert vit(_x()).shape == (6, 10)


def test_prompted_timm_vit_without_prompts_is_the_model():
    vit = _vit()
    x = _x()
    logits, feats = PromptedViT(vit, 0)(x)
    torch.testing.assert_close(logits, vit(x), rtol=0, atol=0)
    assert len(feats) == 2
    assert feats[0].shape == (6, 16)


def test_prompts_enter_the_sequence_and_change_the_logits():
    vit = _vit()
    seen = []
    vit.blocks[0].register_forward_pre_hook(lambda m, a: seen.append(a[0].shape[1]))
    prompts = torch.randn(3, 16, generator=torch.Generator().manual_seed(2))
    logits, _ = PromptedViT(vit, 3)(_x(), prompts)
    assert seen == [1 + 3 + 4]  # class token, 3 prompts, 4 patches
    assert not torch.allclose(logits, vit(_x()))


def test_eva0_per_sample_pass_on_timm_equals_loop():
    vit = _vit()
    a = EVA0(vit, eps=0.05)
    assert a.mode == "norm"  # timm's LayerNorm subclasses nn.LayerNorm
    x = _x()
    z = a.directions(x.shape[0])
    with torch.no_grad():
        batched = a._logits(x, z, +1.0)
        rows = []
        for i in range(x.shape[0]):
            saved = [p.clone() for p in a.params]
            for p, zj in zip(a.params, z, strict=True):
                p.add_(0.05 * zj[i])
            rows.append(vit(x[i : i + 1]))
            for p, s in zip(a.params, saved, strict=True):
                p.copy_(s)
    torch.testing.assert_close(batched, torch.cat(rows), rtol=1e-5, atol=1e-5)


def test_eva0_on_timm_two_passes_and_reset(counter):
    vit = _vit()
    src = [p.clone() for p in vit.parameters()]
    wrapped = counter(vit)
    a = EVA0(wrapped)
    a(_x())
    a(_x(seed=2))
    assert wrapped.count == 4
    assert a.stats.updates == 2
    assert a.stats.drift > 0
    a.reset()
    assert all(torch.equal(p, s) for p, s in zip(vit.parameters(), src, strict=True))


def test_foa_on_timm_vit_uses_popsize_plus_one_passes():
    vit = _vit()
    foa = FOA(vit, _x(16, seed=3), n_prompts=2, popsize=5, seed=0)
    calls = []
    vit.patch_embed.register_forward_hook(lambda m, a, o: calls.append(1))
    out = foa(_x())
    assert out.shape == (6, 10)
    assert torch.isfinite(out).all()
    assert len(calls) == 5 + 1
    assert foa.forward_passes == 6
    assert foa.dim == 2 * 16
