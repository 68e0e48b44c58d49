import numpy as np
import pytest
import torch

from emo_moe import DocumentPoolRouter, TopKRouter, document_pool_mask
from reference import pools_reference

D, E, K = 16, 12, 2


def _pair(**kw):
    torch.manual_seed(0)
    base = TopKRouter(D, E, K)
    emo = DocumentPoolRouter(D, E, K, **kw)
    emo.gate.load_state_dict(base.gate.state_dict())
    return base, emo


DOCS = torch.tensor([[0, 0, 0, 0, 1, 1, 1, 2, 2, 2], [5, 5, 5, 5, 5, 7, 7, 7, 7, 7]])


@pytest.mark.parametrize(
    "kw",
    [
        dict(pool_min=E, pool_max=E, pool_eval=E),
        dict(pool_min=2, pool_max=4, pool_eval=3, pool_mode="never"),
    ],
)
@pytest.mark.parametrize("training", [True, False])
def test_equals_topk_without_pools(kw, training):
    base, emo = _pair(**kw)
    emo.train(training)
    h = torch.randn(2, 10, D)
    a, b = base(h), emo(h, doc_ids=DOCS)
    for x, y in zip(a[:4], b[:4], strict=True):
        assert torch.equal(x, y)  # bitwise


def test_selected_experts_lie_in_pool_of_drawn_size():
    torch.manual_seed(1)
    r = DocumentPoolRouter(D, E, K, pool_min=2, pool_max=6).train()
    out = r(torch.randn(2, 10, D), doc_ids=DOCS)
    pools = []
    for b in range(2):
        for d in DOCS[b].unique():
            tok = DOCS[b] == d
            pool = out.pool_mask[b, tok]
            assert (pool == pool[0]).all()  # one pool per document
            size = int(pool[0].sum())
            assert 2 <= size <= 6
            used = set(out.expert_indices[b, tok].flatten().tolist())
            assert used <= set(torch.nonzero(pool[0]).flatten().tolist())
            pools.append(frozenset(torch.nonzero(pool[0]).flatten().tolist()))
    assert len(set(pools)) > 1  # different documents, different pools


def test_two_documents_in_one_row_can_have_different_pools():
    torch.manual_seed(2)
    r = DocumentPoolRouter(D, E, K, pool_min=3, pool_max=3, pool_mode="always")
    h = torch.cat([torch.randn(1, 5, D) + 3, torch.randn(1, 5, D) - 3], dim=1)
    out = r(h, doc_ids=torch.tensor([[0] * 5 + [1] * 5]))
    assert not torch.equal(out.pool_mask[0, 0], out.pool_mask[0, 9])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pools_match_brute_force(seed):
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(2, 10, E, generator=g, dtype=torch.float64), -1)
    sizes = torch.randint(2, E + 1, (5,), generator=g)
    _, pools = document_pool_mask(probs, DOCS, sizes)
    ref = pools_reference(probs.numpy(), DOCS.numpy(), sizes.numpy())
    got = [set(torch.nonzero(p).flatten().tolist()) for p in pools]
    assert got == ref


def test_eval_uses_pool_eval_and_train_sizes_are_uniform():
    r = DocumentPoolRouter(D, E, K, pool_min=2, pool_max=10, pool_eval=5, pool_mode="always")
    docs = torch.arange(200).repeat_interleave(2).view(4, 100)  # 200 two-token documents
    r.eval()
    assert (r(torch.randn(4, 100, D), doc_ids=docs).pool_mask.sum(-1) == 5).all()
    r.train()
    torch.manual_seed(3)
    sizes = r(torch.randn(4, 100, D), doc_ids=docs).pool_mask[:, ::2].sum(-1).flatten().double()
    assert sizes.min() >= 2
    assert sizes.max() <= 10
    # Uniform{2..10}: mean 6, sd sqrt((9^2 - 1) / 12) = 2.58; 200 draws -> SE 0.18, 4 SE
    assert abs(float(sizes.mean()) - 6.0) < 4 * 2.58 / np.sqrt(200)


def test_gradient_reaches_router_through_masked_softmax():
    torch.manual_seed(4)
    r = DocumentPoolRouter(D, E, K, pool_min=K, pool_max=K).train()  # all but K logits -inf
    out = r(torch.randn(2, 10, D), doc_ids=DOCS)
    assert torch.isinf(out.logits).sum() == 2 * 10 * (E - K)
    (out.expert_weights * torch.randn_like(out.expert_weights)).sum().backward()
    g = r.gate.weight.grad
    assert g is not None
    assert torch.isfinite(g).all()
    assert g.abs().sum() > 0


def test_pool_mode_train_does_not_pool_in_eval():
    _, emo = _pair(pool_min=2, pool_max=2, pool_eval=2)
    emo.eval()
    assert emo(torch.randn(1, 4, D)).pool_mask is None  # no doc_ids needed either
    emo.pool_mode = "always"
    assert (
        emo(torch.randn(1, 4, D), doc_ids=torch.zeros(1, 4, dtype=torch.long))
        .pool_mask.sum(-1)
        .eq(2)
        .all()
    )


def test_doc_ids_from_eos_inside_the_router():
    r = DocumentPoolRouter(D, E, K, pool_min=2, pool_max=2, eos_id=9).train()
    ids = torch.tensor([[1, 2, 9, 3, 4, 5]])
    out = r(torch.randn(1, 6, D), input_ids=ids)
    assert (out.pool_mask[0, :3] == out.pool_mask[0, 0]).all()
