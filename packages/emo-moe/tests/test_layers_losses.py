import pytest
import torch

from emo_moe import (
    DocumentPoolRouter,
    MoEFeedForward,
    RouterOutput,
    TopKRouter,
    global_load_balancing_loss,
    router_z_loss,
)
from emo_moe.baselines import sequence_load_balancing_loss
from reference import load_balancing_reference, moe_reference


@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize("shared", [0, 1])
def test_moe_matches_dense_float64_reference(norm, shared):
    torch.manual_seed(0)
    layer = MoEFeedForward(8, 6, 5, 2, shared, router=TopKRouter(8, 5, 2, shared, norm)).double()
    h = torch.randn(2, 7, 8, dtype=torch.float64)
    y, _ = layer(h)
    torch.testing.assert_close(y, moe_reference(layer, h), rtol=1e-12, atol=1e-12)


def test_shared_experts_always_active_and_never_routed():
    torch.manual_seed(1)
    layer = MoEFeedForward(8, 6, 5, 2, 1).double()
    h = torch.randn(1, 6, 8, dtype=torch.float64)
    y, out = layer(h)
    assert out.probs.shape[-1] == 5
    assert layer.router.gate.out_features == 5
    routed = layer.dispatch(h.reshape(-1, 8), out).view_as(h)
    torch.testing.assert_close(y - routed, layer.shared_experts[0](h))
    allowed = torch.tensor([True, True, False, False, False])
    layer.router.allowed_experts = allowed  # restriction touches routed experts only
    y2, _ = layer(h)
    torch.testing.assert_close(y2, moe_reference(layer, h, allowed))


def _fake(idx, probs):
    return RouterOutput(probs.log(), probs, idx, probs.gather(-1, idx), None)


def test_load_balancing_matches_hand_formula():
    g = torch.Generator().manual_seed(0)
    outs = []
    for _ in range(2):
        probs = torch.softmax(torch.randn(3, 5, 6, generator=g, dtype=torch.float64), -1)
        outs.append(_fake(torch.topk(probs, 2, -1).indices, probs))
    ref = load_balancing_reference(
        [o.expert_indices.numpy() for o in outs], [o.probs.numpy() for o in outs], 6, 2
    )
    assert float(global_load_balancing_loss(outs, 6, 2)) == pytest.approx(ref, rel=1e-12)


def test_global_balancing_invariant_to_row_split_sequence_is_not():
    g = torch.Generator().manual_seed(1)
    probs = torch.softmax(torch.randn(4, 6, 8, generator=g, dtype=torch.float64) * 2, -1)
    idx = torch.topk(probs, 2, -1).indices
    a = global_load_balancing_loss([_fake(idx, probs)], 8, 2)
    b = global_load_balancing_loss([_fake(idx.reshape(2, 12, 2), probs.reshape(2, 12, 8))], 8, 2)
    c = global_load_balancing_loss([_fake(idx.reshape(1, 24, 2), probs.reshape(1, 24, 8))], 8, 2)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a, c)
    s = sequence_load_balancing_loss([_fake(idx, probs)], 8, 2)
    assert float(s) != pytest.approx(float(a))


def test_uniform_routing_gives_one():
    E, k, T = 8, 2, 16
    probs = torch.full((1, T, E), 1.0 / E, dtype=torch.float64)
    idx = torch.stack([torch.arange(T) % E, (torch.arange(T) + 1) % E], -1).unsqueeze(0)
    assert float(global_load_balancing_loss([_fake(idx, probs)], E, k)) == pytest.approx(1.0)


def test_z_loss_is_finite_with_masked_logits():
    torch.manual_seed(2)
    r = DocumentPoolRouter(8, 6, 2, pool_min=2, pool_max=2).train()
    out = r(torch.randn(1, 4, 8), doc_ids=torch.zeros(1, 4, dtype=torch.long))
    z = router_z_loss([out])
    assert torch.isfinite(z)
    ref = torch.logsumexp(out.logits[torch.isfinite(out.logits)].view(4, 2), -1).pow(2).mean()
    torch.testing.assert_close(z, ref)
