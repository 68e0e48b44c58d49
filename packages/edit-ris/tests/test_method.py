"""EditRIS: affinity, discrimination, single call, determinism, batch invariance."""

import numpy as np
import pytest
import torch

from edit_ris import (
    Capture,
    EditRIS,
    ShapeRefGenerator,
    minmax,
    propagate_affinity,
    prototype_probabilities,
)
from reference import propagate_reference, prototype_probabilities_reference


def _items(n=3, split="attr", seed=0):
    items = ShapeRefGenerator(seed=seed).sample(n, split=split, edit="purple")
    return np.stack([i.image for i in items]), [i.expression for i in items], items


def test_identity_affinity_keeps_the_prior():
    a = minmax(torch.rand(2, 5, 5, generator=torch.Generator().manual_seed(0)))
    w = torch.eye(25).expand(2, 25, 25)
    torch.testing.assert_close(propagate_affinity(a, w, 2), a)


def test_uniform_affinity_gives_a_constant_prior():
    a = torch.rand(1, 4, 4, generator=torch.Generator().manual_seed(1))
    p = propagate_affinity(a, torch.full((1, 16, 16), 1 / 16), 2)
    assert torch.allclose(p, p.flatten()[0].expand_as(p))


def test_k_zero_is_the_identity():
    a = torch.rand(1, 4, 4, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(propagate_affinity(a, torch.rand(1, 16, 16), 0), a)


def test_propagation_matches_matrix_power():
    g = torch.Generator().manual_seed(3)
    w = torch.rand(1, 16, 16, generator=g, dtype=torch.float64)
    w = w / w.sum(-1, keepdim=True)
    a = torch.rand(1, 4, 4, generator=g, dtype=torch.float64)
    p = propagate_affinity(a, w, 3)
    np.testing.assert_allclose(p.flatten().numpy(), propagate_reference(a[0], w[0], 3), atol=1e-12)


def test_prototype_scores_equal_brute_force():
    g = torch.Generator().manual_seed(4)
    f, mu, bg = (
        torch.randn(50, 6, generator=g),
        torch.randn(6, generator=g),
        torch.randn(3, 6, generator=g),
    )
    p = prototype_probabilities(f.double(), mu.double(), bg.double(), 0.1)
    np.testing.assert_allclose(
        p.numpy(), prototype_probabilities_reference(f, mu, bg, 0.1), atol=1e-6
    )


def _planted(target):
    """Five one-hot 'objects' (background = type 0) on a 16 x 16 grid."""
    labels = torch.zeros(16, 16, dtype=torch.long)
    for k, (r, c) in enumerate([(2, 2), (2, 10), (10, 2), (10, 10)], start=1):
        labels[r : r + 4, c : c + 4] = k
    feats = torch.nn.functional.one_hot(labels, 5).permute(2, 0, 1).float()[None]
    prior = (labels == target).float()[None]
    return labels, feats, prior


@pytest.mark.parametrize("target", [1, 2, 3, 4])
def test_planted_discrimination_recovers_the_object(tiny, target):
    labels, feats, prior = _planted(target)
    ris = EditRIS(tiny)
    cap = Capture(features={"up16": feats})
    p = ris.discriminate(cap, prior)
    assert torch.equal(p > 0.5, (labels == target)[None])
    m = p ** (1 - ris.lam) * prior**ris.lam
    assert torch.equal(m > 0.5, (labels == target)[None])


def test_discrimination_is_invariant_to_feature_scale(tiny):
    g = torch.Generator().manual_seed(5)
    feats = torch.randn(1, 8, 16, 16, generator=g)
    prior = minmax(torch.rand(1, 16, 16, generator=g))
    ris = EditRIS(tiny)
    p1 = ris.discriminate(Capture(features={"up16": feats}), prior)
    p2 = ris.discriminate(Capture(features={"up16": 7.5 * feats}), prior)
    torch.testing.assert_close(p1, p2, atol=1e-6, rtol=0)


def test_one_denoiser_call_per_expression_and_earliest_timestep(tiny, monkeypatch):
    calls = []
    orig = type(tiny).denoise

    def counting(self, x_t, *a, **k):
        calls.append(x_t.shape[0])
        return orig(self, x_t, *a, **k)

    monkeypatch.setattr(type(tiny), "denoise", counting)
    x, e, _ = _items(3)
    ris = EditRIS(tiny)
    ris.predict(x, e)
    assert calls == [3]  # one batched call: one evaluation per (image, expression)
    assert ris.resolved_timestep == tiny.timesteps(tiny.num_inference_steps)[0] == 999
    assert EditRIS(tiny, template=["make the {ref} red", "paint the {ref}"]).predict(x, e)
    assert calls[1:] == [3, 3]  # a template ensemble costs one call per template


def test_timestep_forms(tiny):
    assert EditRIS(tiny, timestep=0.5).resolved_timestep == 499
    assert EditRIS(tiny, timestep=1.0).resolved_timestep == 999
    assert EditRIS(tiny, timestep=250).resolved_timestep == 250


def test_determinism_for_a_fixed_seed(tiny):
    x, e, _ = _items(3)
    a, b = EditRIS(tiny, seed=3).predict(x, e), EditRIS(tiny, seed=3).predict(x, e)
    np.testing.assert_array_equal(a.soft, b.soft)
    c = EditRIS(tiny, seed=4).predict(x, e)
    assert not np.array_equal(a.soft, c.soft)


def test_denoiser_is_batch_invariant(tiny):
    x, _e, _ = _items(3)
    t = torch.from_numpy(x)
    tb = tiny.tokenize(["make the red circle red", "make the blue square red", "make the the red"])
    x_t = torch.randn(3, 12, 16, 16, generator=torch.Generator().manual_seed(0))
    full = tiny.denoise(x_t, tiny.encode(t), torch.full((3,), 999), tb.ids, tb.attention_mask)
    for i in range(3):
        one = tiny.denoise(
            x_t[i : i + 1],
            tiny.encode(t[i : i + 1]),
            torch.tensor([999]),
            tb.ids[i : i + 1],
            tb.attention_mask[i : i + 1],
        )
        torch.testing.assert_close(one[0], full[i], atol=1e-5, rtol=0)


def test_prior_and_discrimination_are_batch_invariant(tiny):
    # a well-conditioned synthetic capture (a random-init editor's near-uniform attention makes
    # minmax(W^2 a) amplify float32 rounding); 3 images, 12 tokens, R = 16
    g = torch.Generator().manual_seed(7)
    cap = Capture(
        cross_attn={
            n: (3 * torch.randn(3, 2, s * s, 12, generator=g)).softmax(-1)
            for n, s in (("down16", 16), ("down8", 8), ("up16", 16))
        },
        self_attn={"up16": (3 * torch.randn(3, 256, 256, generator=g)).softmax(-1)},
        features={
            "up16": torch.randn(3, 8, 16, 16, generator=g),
            "up8": torch.randn(3, 16, 8, 8, generator=g),
        },
    )
    spans = [[3, 4], [3], [4, 5, 6]]
    ris = EditRIS(tiny)
    a, prior = ris.spatial_prior(cap, spans)
    p = ris.discriminate(cap, prior)
    for i in range(3):
        sub = Capture(
            cross_attn={k: v[i : i + 1] for k, v in cap.cross_attn.items()},
            self_attn={k: v[i : i + 1] for k, v in cap.self_attn.items()},
            features={k: v[i : i + 1] for k, v in cap.features.items()},
        )
        a_i, prior_i = ris.spatial_prior(sub, spans[i : i + 1])
        torch.testing.assert_close(a_i[0], a[i], atol=1e-5, rtol=0)
        torch.testing.assert_close(prior_i[0], prior[i], atol=1e-5, rtol=0)
        torch.testing.assert_close(ris.discriminate(sub, prior_i)[0], p[i], atol=1e-5, rtol=0)


def test_numpy_in_numpy_out_torch_in_torch_out(tiny):
    x, e, _ = _items(2)
    out_np = EditRIS(tiny).predict(x, e)
    out_t = EditRIS(tiny).predict(torch.from_numpy(x), e)
    assert isinstance(out_np.masks, np.ndarray)
    assert out_np.masks.dtype == bool
    assert isinstance(out_t.masks, torch.Tensor)
    np.testing.assert_allclose(out_np.soft, out_t.soft.numpy(), atol=1e-6)


def test_backbone_is_never_modified(tiny):
    state = {k: v.clone() for k, v in tiny.state_dict().items()}
    x, e, _ = _items(2)
    EditRIS(tiny).predict(x, e)
    assert not tiny.training
    for k, v in tiny.state_dict().items():
        assert torch.equal(v, state[k])
