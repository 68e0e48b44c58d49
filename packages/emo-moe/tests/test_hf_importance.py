"""expert_importance on a transformers MoE model (tiny OLMoE built in memory, no download)."""

import pytest
import torch

from emo_moe import expert_importance, hf_router_logits, select_expert_subset


@pytest.fixture(scope="module")
def olmoe():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.OlmoeConfig(
        vocab_size=64, hidden_size=16, intermediate_size=8, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, num_experts=8, num_experts_per_tok=2,
        eos_token_id=None, pad_token_id=None, bos_token_id=None,
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = transformers.OlmoeForCausalLM(cfg).eval()
        for mod in model.modules():
            if hasattr(mod, "top_k") and hasattr(mod, "weight"):
                torch.nn.init.normal_(mod.weight, std=1.0)  # spread the routing
    return model


@pytest.fixture(scope="module")
def calib():
    g = torch.Generator().manual_seed(1)
    return [torch.randint(0, 64, (12,), generator=g) for _ in range(3)]


def test_router_prob_is_the_mean_gate_softmax(olmoe, calib):
    imp = expert_importance(olmoe, calib)
    assert imp.shape == (2, 8)
    ref = torch.zeros(2, 8, dtype=torch.float64)
    for doc in calib:
        for li, lg in enumerate(hf_router_logits(olmoe, doc.unsqueeze(0))):
            ref[li] += torch.softmax(lg.double(), -1).sum(0)
    torch.testing.assert_close(imp, (ref / 36).float())
    torch.testing.assert_close(imp.sum(1), torch.ones(2))


def test_output_aware_matches_a_per_token_loop(olmoe, calib):
    imp = expert_importance(olmoe, calib, method="output_aware")
    blocks = [m for n, m in olmoe.named_modules() if n.endswith("mlp")]
    ref = torch.zeros(2, 8, dtype=torch.float64)
    seen = {}
    hooks = [
        b.register_forward_hook(lambda m, a, o, li=li: seen.__setitem__(li, (a[0], o)))
        for li, b in enumerate(blocks)
    ]
    with torch.no_grad():
        for doc in calib:
            olmoe(doc.unsqueeze(0))
            for li, b in enumerate(blocks):
                h, y = seen[li]
                x, y = h.reshape(-1, 16), y.reshape(-1, 16)
                p = torch.softmax(b.gate(x)[0].double(), -1)
                w, idx = torch.topk(p, 2, -1)  # OLMoE: no renormalisation by default
                for t in range(x.shape[0]):
                    rel = y[t].double().norm() / x[t].double().norm()
                    for j in range(2):
                        e = int(idx[t, j])
                        one = torch.ones(1, 1)
                        out = b.experts(x[t : t + 1], torch.tensor([[e]]), one)
                        ref[li, e] += w[t, j] * out.double().norm() * rel
    for hk in hooks:
        hk.remove()
    torch.testing.assert_close(imp, (ref / 36).float(), rtol=1e-4, atol=1e-6)
    # the single-expert calls add up to the block output (so FFN_e is what the block runs)
    with torch.no_grad():
        b, x = blocks[0], torch.randn(5, 16)
        _, w, idx = b.gate(x)
        tot = sum(
            w[:, j : j + 1] * b.experts(x, idx[:, j : j + 1], torch.ones(5, 1)) for j in range(2)
        )
        torch.testing.assert_close(tot, b(x.unsqueeze(0)).squeeze(0), rtol=1e-5, atol=1e-6)


def test_greedy_layerwise_restricts_the_earlier_layers(olmoe, calib):
    plain = expert_importance(olmoe, calib)
    greedy = expert_importance(olmoe, calib, greedy_layerwise=True, m=3)
    torch.testing.assert_close(greedy[0], plain[0])  # layer 0 sees the full model
    assert not torch.allclose(greedy[1], plain[1])  # layer 1 runs after layer 0 keeps 3 of 8
    assert len(select_expert_subset(greedy, m=3)) == 2


def test_doc_ids_are_refused_for_transformers(olmoe, calib):
    pairs = [(d.unsqueeze(0), torch.zeros(1, 12, dtype=torch.long)) for d in calib]
    with pytest.raises(ValueError, match=r"transformers model takes no doc_ids"):
        expert_importance(olmoe, pairs)
