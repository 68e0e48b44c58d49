import numpy as np
import pytest
import torch
from torch import nn

from emo_moe import (
    DocumentPoolRouter,
    TinyMoEConfig,
    TinyMoELM,
    TopKRouter,
    expert_importance,
    modularity_nmi,
    restrict_experts,
    restrict_hf_experts,
    select_expert_subset,
)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(pool_min=1, pool_max=4), "pool_min=1 must be >= top_k=2"),
        (dict(pool_min=2, pool_max=9), "pool_max=9 must be <= num_experts=8"),
        (dict(pool_min=5, pool_max=4), "pool_min=5 must be <= pool_max=4"),
        (dict(pool_min=2, pool_max=4, pool_eval=1), "pool_eval=1"),
        (dict(pool_mode="sometimes"), "pool_mode"),
        (dict(num_shared=3), "num_shared=3 must be <= top_k=2"),
    ],
)
def test_router_construction(kw, match):
    with pytest.raises(ValueError, match=match):
        DocumentPoolRouter(4, 8, 2, **kw)


def test_topk_router_num_shared():
    with pytest.raises(ValueError, match="num_shared"):
        TopKRouter(4, 8, 2, num_shared=3)


def test_pooled_without_doc_ids():
    r = DocumentPoolRouter(4, 8, 2).train()
    with pytest.raises(ValueError, match="needs doc_ids"):
        r(torch.randn(1, 3, 4))


@pytest.mark.parametrize(
    ("doc_ids", "match"),
    [
        (torch.zeros(1, 4, dtype=torch.long), "shape"),
        (torch.tensor([[0, 1, 0]]), "contiguous"),
        (torch.zeros(1, 3), "integer"),
    ],
)
def test_bad_doc_ids(doc_ids, match):
    r = DocumentPoolRouter(4, 8, 2).train()
    with pytest.raises(ValueError, match=match):
        r(torch.randn(1, 3, 4), doc_ids=doc_ids)


def _tiny():
    cfg = TinyMoEConfig(
        d_model=16,
        n_layers=1,
        n_heads=2,
        max_len=8,
        num_experts=8,
        top_k=2,
        d_expert=8,
        pool_min=2,
        pool_max=8,
        pool_eval=4,
    )
    return TinyMoELM(cfg)


@pytest.mark.parametrize(
    ("subset", "match"),
    [([0], "fewer than top_k"), ([1, 1, 2], "duplicate"), ([0, 8], "outside")],
)
def test_bad_subsets(subset, match):
    with pytest.raises(ValueError, match=match), restrict_experts(_tiny(), [torch.tensor(subset)]):
        pass


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(fraction=0.0), r"fraction must be in \(0, 1\]"),
        (dict(fraction=1.5), r"fraction must be in \(0, 1\]"),
        (dict(m=1, top_k=2), "subset size m=1"),
        (dict(), "exactly one"),
    ],
)
def test_bad_selection(kw, match):
    with pytest.raises(ValueError, match=match):
        select_expert_subset(torch.rand(2, 8), **kw)


def test_empty_calibration():
    with pytest.raises(ValueError, match="calibration data is empty"):
        expert_importance(_tiny(), [])


def test_hf_without_gates_lists_modules():
    with (
        pytest.raises(TypeError, match=r"no recognisable MoE gate.*Linear"),
        restrict_hf_experts(nn.Sequential(nn.Linear(2, 2)), [[0, 1]]),
    ):
        pass


def test_nmi_mismatch():
    with pytest.raises(ValueError, match="do not match"):
        modularity_nmi(np.zeros((3, 2)), [0, 1])
