import itertools

import numpy as np
import pytest
import torch
from scipy import ndimage
from torch.nn import functional as nnf

from easylens import EasyAmplifier, EasyLens, EasyTag, GenericViTAdapter, morphology_weights
from reference import components_reference, weights_reference

GRIDS = [
    np.array([[1, 1, 0, 0, 0], [0, 1, 0, 0, 1], [0, 0, 0, 0, 1], [1, 0, 0, 0, 0], [0, 0, 0, 1, 1]]),
    np.eye(6, dtype=int) + np.eye(6, k=3, dtype=int),
    np.zeros((4, 4), dtype=int),
]


@pytest.mark.parametrize("grid", GRIDS)
def test_components_and_ring_match_reference_and_scipy(grid):
    labels, n = ndimage.label(grid, structure=np.ones((3, 3)))
    comps = components_reference(grid)
    assert n == len(comps)
    assert sorted(len(c) for c in comps) == sorted(np.bincount(labels.ravel())[1:].tolist())
    w, g = morphology_weights(grid, 0.5, 2.0, 3.0, 1.0)
    w_ref, g_ref = weights_reference(grid, 0.5, 2.0, 3.0, 1.0)
    np.testing.assert_allclose(w, w_ref)
    np.testing.assert_allclose(g, g_ref)
    ring = ndimage.binary_dilation(grid.astype(bool), structure=np.ones((3, 3))) & ~grid.astype(
        bool
    )
    np.testing.assert_array_equal(w == 0.5, ring)


def test_gain_non_increasing_in_area_and_large_components_dropped():
    gains = []
    for area in range(1, 10):
        grid = np.zeros((10, 10), dtype=bool)
        grid[0, :area] = True
        gains.append(morphology_weights(grid, 0.5, 2.0, 3.0, 1.0)[1][0, 0])
    assert all(a >= b for a, b in itertools.pairwise(gains))
    assert gains[0] == 3.0
    assert gains[3] == pytest.approx(1.5)
    big = np.zeros((4, 4), dtype=bool)
    big[:2, :3] = True  # 6 > 0.25 * 16
    big[3, 3] = True
    w, _ = morphology_weights(big, 0.5, 2.0, 3.0, 0.25)
    assert w[:2, :3].sum() == 0
    assert w[3, 3] == 1.0


def _mean_pool_setup(make_bank, d=8, n_side=3):
    # tokens are the "image"; identity blocks; head = linear mean-pool into the joint space
    normal, lesion = torch.zeros(1, d), torch.zeros(1, d)
    normal[0, 0], lesion[0, 1] = 1.0, 1.0
    blocks = [torch.nn.Identity(), torch.nn.Identity()]
    W = torch.eye(d)
    adapter = GenericViTAdapter(
        lambda x: x[:, 0], blocks, lambda t: t.mean(1) @ W, (n_side, n_side), 0
    )
    adapter._backbone_id = "test"
    bank = make_bank(normal, lesion, (n_side, n_side), reference="cluster")
    return adapter, bank, normal[0], lesion[0], W


def test_amplification_moves_g_towards_t_plus_and_keeps_normals(make_bank):
    adapter, bank, normal, lesion, W = _mean_pool_setup(make_bank)
    lens = EasyLens(adapter, bank, tag=EasyTag(calibrated=False))
    z = normal.repeat(1, 9, 1)
    z[0, 4] = 0.6 * normal + 0.8 * lesion  # closer to the lesion prototype than to normal
    t_pos, t_neg = lesion @ W, normal @ W

    def s(g):
        g = nnf.normalize(g, dim=-1)
        return float(g @ t_pos - g @ t_neg)

    g0, g1 = adapter.encode_image(z[:, None]), lens.encode_image(z[:, None])
    assert s(g1) > s(g0)
    rep = lens.explain(z[:, None])
    assert rep.tag.selected.flatten().nonzero().flatten().tolist() == [4]
    # the amplified token's cosine to its normal counterfactual decreases
    amp = EasyAmplifier()(z, rep.tag, bank)
    assert nnf.cosine_similarity(amp[0, 4], normal, dim=0) < nnf.cosine_similarity(
        z[0, 4], normal, dim=0
    )
    pure = normal.repeat(1, 9, 1)[:, None]
    assert torch.equal(lens.encode_image(pure), adapter.encode_image(pure))


def test_norm_clip_and_prefix_untouched():
    amp = EasyAmplifier(alpha=100.0, max_norm_ratio=2.0)
    tokens = torch.randn(1, 3, 4)
    cf = nnf.normalize(torch.randn(1, 2, 4), dim=-1)
    out = amp.amplify(tokens, torch.tensor([[1.0, 0.0]]), cf, num_prefix_tokens=1)
    assert torch.equal(out[:, :1], tokens[:, :1])
    assert torch.equal(out[0, 2], tokens[0, 2])
    assert out[0, 1].norm() == pytest.approx(2.0 * float(tokens[0, 1].norm()), rel=1e-5)
    proto = nnf.normalize(torch.randn(1, 2, 4), dim=-1)
    out_p = EasyAmplifier(residual="prototype").amplify(
        tokens, torch.tensor([[1.0, 0.0]]), cf, proto, 1
    )
    expected = tokens[0, 1] + tokens[0, 1].norm() * (proto[0, 0] - cf[0, 0])
    expected = expected * min(1.0, 3.0 * float(tokens[0, 1].norm()) / float(expected.norm()))
    torch.testing.assert_close(out_p[0, 1], expected)
