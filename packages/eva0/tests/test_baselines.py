import sys

import numpy as np
import pytest
import torch

import reference
from eva0._cmaes import CMAES
from eva0.baselines import FOA, DeYO, NoAdapt, Tent, ZOShared, patch_shuffle
from eva0.losses import entropy
from eva0.models import PromptedViT, tiny_vit


def _vit(seed=0):
    return tiny_vit(
        8,
        4,
        1,
        10,
        embed_dim=16,
        depth=2,
        num_heads=2,
        generator=torch.Generator().manual_seed(seed),
    ).eval()


def _x(B=8, seed=1):
    return torch.rand(B, 1, 8, 8, generator=torch.Generator().manual_seed(seed))


def test_noadapt_is_log_softmax():
    m = _vit()
    x = _x()
    torch.testing.assert_close(NoAdapt(m)(x), torch.log_softmax(m(x), 1))


def test_tent_equals_manual_sgd_step():
    m, ref = _vit(), _vit()
    x = _x()
    Tent(m, lr=0.1, momentum=0.9)(x)
    expected = reference.tent_sgd_step(ref, x, 0.1, entropy)
    for n, p in expected.items():
        torch.testing.assert_close(dict(m.named_parameters())[n], p)
    other = [n for n, _ in ref.named_parameters() if "norm" not in n]
    for n in other:
        assert torch.equal(dict(m.named_parameters())[n], dict(ref.named_parameters())[n])


def test_tent_reset_bitwise():
    m = _vit()
    orig = [p.detach().clone() for p in m.parameters()]
    t = Tent(m, lr=0.1)
    t(_x())
    t.reset()
    assert all(torch.equal(a, b) for a, b in zip(m.parameters(), orig, strict=True))


def test_patch_shuffle_is_a_permutation_of_patches():
    x = torch.arange(64.0).reshape(1, 1, 8, 8)
    y = patch_shuffle(x, 4, torch.Generator().manual_seed(0))
    assert sorted(y.flatten().tolist()) == sorted(x.flatten().tolist())
    assert not torch.equal(x, y)
    assert torch.equal(y[0, 0, :2, :2], y[0, 0, :2, :2])
    with pytest.raises(ValueError, match="must divide"):
        patch_shuffle(x, 3, torch.Generator())


def test_deyo_runs_and_counts():
    d = DeYO(_vit(), lr=0.1, ent_margin=10.0, plpd_threshold=-1.0)
    out = d(_x())
    assert out.shape == (8, 10)
    assert d.forward_passes == 2
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        d(torch.zeros(2, 64))


def test_foa_calls_popsize_plus_one(monkeypatch):
    m = _vit()
    foa = FOA(m, _x(32, seed=5), n_prompts=2, seed=0)
    assert foa.popsize == 4 + int(3 * np.log(2 * 16))
    calls = []
    orig = foa.prompted.forward
    monkeypatch.setattr(
        foa.prompted, "forward", lambda *a, **k: (calls.append(1), orig(*a, **k))[1]
    )
    for t in range(2):
        assert foa(_x(seed=t)).shape == (8, 10)
    assert len(calls) == 2 * (foa.popsize + 1)
    assert foa.forward_passes == 2 * (foa.popsize + 1)


def test_prompted_vit_needs_a_vit_like_model():
    with pytest.raises(TypeError, match="needs a timm VisionTransformer-like model"):
        PromptedViT(torch.nn.Linear(4, 2), 0)
    m = _vit()
    m.blocks = torch.nn.Linear(4, 4)  # not a sequence of blocks
    with pytest.raises(TypeError, match="needs a timm VisionTransformer-like model"):
        PromptedViT(m, 0)


def test_prompted_vit_without_prompts_matches_model():
    m = _vit()
    x = _x()
    logits, feats = PromptedViT(m, 0)(x)
    torch.testing.assert_close(logits, m(x))
    assert len(feats) == 2


def test_foa_needs_a_vit_and_cma_extra(monkeypatch):
    with pytest.raises(TypeError, match="VisionTransformer"):
        FOA(torch.nn.Sequential(torch.nn.Linear(2, 2)), torch.zeros(4, 2))
    monkeypatch.setitem(sys.modules, "cma", None)
    with pytest.raises(ImportError, match=r"eva0\[baselines\]"):
        FOA(_vit(), _x(16), backend="cma")


@pytest.mark.slow  # importing cma takes ~5 s on a busy core
def test_foa_cma_backend_runs():
    pytest.importorskip("cma")
    foa = FOA(_vit(), _x(16), n_prompts=1, popsize=4, backend="cma")
    assert foa(_x()).shape == (8, 10)
    assert foa.forward_passes == 5


def test_builtin_cmaes_minimises_a_quadratic():
    es = CMAES(np.full(5, 3.0), 1.0, rng=np.random.default_rng(0))
    for _ in range(150):
        xs = es.ask()
        es.tell((xs**2).sum(1))
    assert np.linalg.norm(es.mean) < 1e-3


def test_zoshared_config():
    z = ZOShared(_vit(), eps=0.01)
    assert z.mode == "shared"
    assert z.loss == "entropy"
    assert z.anchor_weight == 0.0
    z(_x())
    assert z.stats.forward_passes == 2
