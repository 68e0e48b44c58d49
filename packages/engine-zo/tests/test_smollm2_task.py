"""The SmolLM2 benchmark's fast forward (bench/smollm2_task.py) against the full model."""

import pytest
import torch
from smollm2_task import (
    SHOTS,
    TunedTail,
    cache_statements,
    encode,
    few_shot_prefix,
    is_true,
    make_statements,
    statement,
    tuned_parameters,
    verbalizer_ids,
)

pytest.importorskip("transformers")
WORDS = ("T", "F")  # one byte token each in the tiny byte-level tokenizer


@pytest.fixture(scope="module")
def tiny():
    from methodkit.smollm2 import tiny_smollm2

    return tiny_smollm2(seed=0, layers=2, hidden=48)


def full_model_logits(model, tok, rows, ids):
    enc = encode(tok, [few_shot_prefix(WORDS) + statement(*r) for r in rows])
    with torch.no_grad():
        return model(**enc, use_cache=False).logits[:, -1, ids]


def test_fast_forward_equals_the_full_model_after_the_tuned_weights_move(tiny):
    model, tok = tiny
    rows = make_statements(12, seed=0)  # mixed lengths (1- and 2-digit numbers): left padding
    assert len({len(statement(*r)) for r in rows}) > 1
    ids = verbalizer_ids(tok, WORDS)
    params = tuned_parameters(model)
    start = [p.detach().clone() for p in params]
    try:
        cache = cache_statements(model, tok, rows, WORDS, batch_size=5)  # 3 chunks, padded
        tail = TunedTail(model, ids)
        torch.testing.assert_close(tail(cache), full_model_logits(model, tok, rows, ids))
        gen = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for p in params:  # the cache must stay valid for any value of the tuned weights
                p.add_(0.5 * torch.randn(p.shape, generator=gen))
        full = full_model_logits(model, tok, rows, ids)
        torch.testing.assert_close(tail(cache), full, rtol=1e-4, atol=1e-5)
        labels = torch.tensor([0 if is_true(r) else 1 for r in rows])
        torch.testing.assert_close(
            tail.loss(cache), torch.nn.functional.cross_entropy(full, labels)
        )
    finally:
        with torch.no_grad():
            for p, s in zip(params, start, strict=True):
                p.copy_(s)


def test_tuned_subset_is_the_down_projection_and_norms_of_the_last_block(tiny):
    model, _ = tiny
    params = tuned_parameters(model)
    block = model.model.layers[-1]
    frozen = [block.input_layernorm.weight, block.self_attn.k_proj.weight]
    frozen += [block.self_attn.v_proj.weight, block.self_attn.q_proj.weight]
    frozen += [block.self_attn.o_proj.weight, block.mlp.up_proj.weight]
    frozen.append(model.model.embed_tokens.weight)
    assert all(p.requires_grad for p in params)
    assert not any(p.requires_grad for p in frozen)
    assert {id(p) for p in frozen}.isdisjoint(id(p) for p in params)
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    assert trainable == {id(p) for p in params}
    assert any(p is block.mlp.down_proj.weight for p in params)
    assert any(p is model.model.norm.weight for p in params)


def test_statements_are_balanced_distinct_and_disjoint():
    train = make_statements(40, seed=0)
    test = make_statements(30, seed=1, exclude=set(train))
    assert len(set(train)) == 40
    assert set(train).isdisjoint(test)
    assert set(SHOTS).isdisjoint(train + test)
    assert sum(is_true(r) for r in train) == 20
    assert all(0 <= a <= 20 and 0 <= b <= 20 and a != b for a, b in train + test)


def test_multi_token_verbalizer_is_rejected(tiny):
    _, tok = tiny
    with pytest.raises(ValueError, match="each verbalizer must be one token"):
        verbalizer_ids(tok, (" True", " False"))
