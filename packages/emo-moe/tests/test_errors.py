"""Bad inputs of every public entry point: a ValueError/TypeError naming the argument."""

import numpy as np
import pytest
import torch
from torch import nn

from emo_moe import (
    MoEFeedForward,
    TinyMoEConfig,
    TinyMoELM,
    TopKRouter,
    baselines,
    build_offline_corpus,
    doc_ids_from_cu_seqlens,
    doc_ids_from_eos,
    doc_ids_from_position_ids,
    domain_losses,
    expert_importance,
    expert_usage_matrix,
    modularity_nmi,
    pack_documents,
    prune_experts,
    restrict_experts,
    rows_loss,
    sample_pool_sizes,
    select_expert_subset,
    split_documents,
)


@pytest.fixture(scope="module")
def model():
    cfg = TinyMoEConfig(
        d_model=16, n_layers=1, n_heads=2, max_len=16, num_experts=4, top_k=2, d_expert=8,
        pool_min=2, pool_max=4, pool_eval=4,
    )  # fmt: skip
    return TinyMoELM(cfg)


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"d_model": -1}, ValueError, r"^d_model must be positive, got -1$"),
        ({"d_model": 0}, ValueError, r"^d_model must be positive, got 0$"),
        ({"d_model": 12.5}, TypeError, r"d_model must be an int, got 12.5"),
        ({"n_heads": 0}, ValueError, r"n_heads must be positive, got 0"),
        ({"n_heads": -2}, ValueError, r"n_heads must be positive, got -2"),
        ({"vocab_size": 0}, ValueError, r"vocab_size must be positive"),
        ({"num_experts": 0}, ValueError, r"num_experts must be positive"),
        ({"top_k": 0}, ValueError, r"top_k must be positive"),
        ({"num_shared": -1}, ValueError, r"num_shared must be >= 0, got -1"),
        ({"pool_min": 0}, ValueError, r"pool_min must be positive"),
        ({"num_experts": 4, "top_k": 5}, ValueError, r"top_k=5 must be <= num_experts=4"),
        ({"router": "x"}, ValueError, r"router must be one of"),
        ({"lb_weight": float("nan")}, ValueError, r"lb_weight must be a finite number >= 0"),
        ({"z_weight": -1.0}, ValueError, r"z_weight must be a finite number >= 0, got -1.0"),
        ({"lb_weight": "0.1"}, TypeError, r"lb_weight must be a number"),
        ({"eos_id": 300}, ValueError, r"eos_id=300 must be < vocab_size=258"),
        ({"d_model": 30, "n_heads": 4}, ValueError, r"d_model=30 must be divisible by n_heads=4"),
    ],
)
def test_config_fields_checked_in_order(kw, error, match):
    with pytest.raises(error, match=match):
        TinyMoEConfig(**kw)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: doc_ids_from_eos(torch.tensor([[1.0, 256.0]]), 256), TypeError,
         r"input_ids must be an integer tensor \(torch.long\), got dtype torch.float32"),
        (lambda: doc_ids_from_eos(torch.tensor([[True, False]]), 1), TypeError,
         r"input_ids must be an integer tensor"),
        (lambda: doc_ids_from_eos(np.array([[1, 256]]), 256), TypeError,
         r"input_ids must be a torch.Tensor, got ndarray"),
        (lambda: doc_ids_from_eos(torch.zeros(1, 2, 3, dtype=torch.long), 256), ValueError,
         r"input_ids must have shape \(B, S\) or \(S,\)"),
        (lambda: doc_ids_from_eos(torch.tensor([[1, 256]]), 256.0), TypeError,
         r"eos_id must be an int, got 256.0"),
        (lambda: doc_ids_from_position_ids(torch.tensor([[0.0, 1.0]])), TypeError,
         r"position_ids must be an integer tensor"),
        (lambda: doc_ids_from_cu_seqlens(torch.tensor([0.0, 2.5])), TypeError,
         r"cu_seqlens must be an integer tensor"),
    ],
)  # fmt: skip
def test_document_id_inputs(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_model_inputs(model):
    ids = torch.randint(0, 256, (2, 8))
    with pytest.raises(TypeError, match=r"input_ids must be an integer tensor"):
        model(torch.rand(2, 8))
    with pytest.raises(ValueError, match=r"input_ids must be in \[0, vocab_size=258\)"):
        model(torch.full((2, 8), 300))
    with pytest.raises(ValueError, match=r"got values in \[-1, -1\]"):
        model(torch.full((2, 8), -1))
    with pytest.raises(ValueError, match=r"input_ids is empty"):
        model(torch.zeros(0, 8, dtype=torch.long))
    with pytest.raises(ValueError, match=r"labels must have the shape of input_ids \(2, 8\)"):
        model(ids, labels=ids[:, :4])
    with pytest.raises(ValueError, match=r"sequence length 40 exceeds max_len=16"):
        model(torch.zeros(1, 40, dtype=torch.long))


def test_selection_inputs(model):
    with pytest.raises(TypeError, match=r"model must be a torch nn.Module, got str"):
        expert_importance("model", torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(TypeError, match=r"input_ids must be an integer tensor"):
        expert_importance(model, torch.rand(2, 8))
    with pytest.raises(TypeError, match=r"Linear has no recognisable MoE gate modules"):
        expert_importance(nn.Linear(2, 2), torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"greedy_layerwise=True needs fraction or m"):
        expert_importance(model, torch.zeros(1, 4, dtype=torch.long), greedy_layerwise=True)
    nan = torch.tensor([[float("nan"), 1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match=r"importance holds NaN or inf scores"):
        select_expert_subset(nan, m=2)
    with pytest.raises(TypeError, match=r"m must be an int, got 2.5"):
        select_expert_subset(torch.rand(2, 4), m=2.5)
    with pytest.raises(TypeError, match=r"subset 0 must hold integer expert indices"):
        restrict_experts(model, [[0.5, 1.5]]).__enter__()
    with pytest.raises(TypeError, match=r"subset 0 must hold integer expert indices"):
        prune_experts(model, [torch.tensor([0.0, 1.0])])


def test_corpus_and_metric_inputs(model):
    with pytest.raises(TypeError, match=r"documents must be strings, got a bytes"):
        pack_documents([b"ab"], 8)
    with pytest.raises(ValueError, match=r"fractions must be 3 non-negative numbers"):
        split_documents(["a"], (float("nan"), 0.5, 0.5))
    with pytest.raises(ValueError, match=r"bytes_per_domain must be >= 4096"):
        build_offline_corpus(bytes_per_domain=10)
    with pytest.raises(ValueError, match=r"usage holds 8 NaN/inf value\(s\)"):
        modularity_nmi(np.full((4, 2), np.nan), [0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"max_len must be an int >= 1, got 0"):
        expert_usage_matrix(model, ["abc"], 0)
    with pytest.raises(ValueError, match=r"batch_size must be an int >= 1, got 0"):
        expert_usage_matrix(model, ["abc"], 8, batch_size=0)
    with pytest.raises(ValueError, match=r"batch_size must be an int >= 1, got 0"):
        rows_loss(model, torch.zeros(2, 8, dtype=torch.long), batch_size=0)
    with pytest.raises(TypeError, match=r"input_ids must be an integer tensor"):
        rows_loss(model, torch.rand(2, 8))
    with pytest.raises(ValueError, match=r"batch_size must be an int >= 1"):
        domain_losses(model, {"a": ["hello"]}, 8, batch_size=-1)


def test_pool_and_router_inputs():
    with pytest.raises(ValueError, match=r"need 1 <= pool_min <= pool_max, got pool_min=5"):
        sample_pool_sizes(3, 5, 2)
    with pytest.raises(ValueError, match=r"n_docs must be >= 0, got -1"):
        sample_pool_sizes(-1, 1, 2)
    with pytest.raises(ValueError, match=r"m must be in \[1, 4\], got 0"):
        baselines.random_expert_subsets(2, 4, 0)
    with pytest.raises(TypeError, match=r"d_model must be an int, got float"):
        TopKRouter(4.0, 2, 1)
    with pytest.raises(ValueError, match=r"h must have shape \(B, S, 4\), got \(2, 3, 5\)"):
        MoEFeedForward(4, 8, 4, 2)(torch.rand(2, 3, 5))
