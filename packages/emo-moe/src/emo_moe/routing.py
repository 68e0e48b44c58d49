"""Routers: standard token-choice top-k and EMO's document-pool router."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as nnf

from emo_moe._emo import apply_pool_mask, document_pool_mask, sample_pool_sizes
from emo_moe.documents import doc_ids_from_eos, document_index, validate_doc_ids

__all__ = ["POOL_MODES", "DocumentPoolRouter", "RouterOutput", "TopKRouter"]

POOL_MODES = ("train", "always", "never")


class RouterOutput(NamedTuple):
    """What a router returns for a ``(B, S, d)`` input (routed experts only).

    Attributes:
        logits: ``(B, S, E)`` router logits after any pool / restriction mask (``-inf`` outside).
        probs: ``(B, S, E)`` ``softmax(logits)``.
        expert_indices: ``(B, S, k)`` selected experts, by decreasing probability.
        expert_weights: ``(B, S, k)`` their weights (``p_{t,e}``, renormalised if asked).
        pool_mask: ``(B, S, E)`` bool pool of each token's document, or None when not pooled.
    """

    logits: torch.Tensor
    probs: torch.Tensor
    expert_indices: torch.Tensor
    expert_weights: torch.Tensor
    pool_mask: torch.Tensor | None


def _check_int(name: str, value: int, low: int, high: int | None = None) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        hi = "inf" if high is None else str(high)
        raise ValueError(f"{name} must be in [{low}, {hi}], got {value}")


class TopKRouter(nn.Module):
    """Standard token-choice router: ``p_t = softmax(W_r h_t)``, ``K_t = topk(p_t, k)``.

    Selected weights are not renormalised by default (OLMoE); ``norm_topk_prob=True`` divides
    them by their sum (Mixtral). ``num_shared`` always-on experts are not routed: the router
    never sees, masks or balances them.

    Args:
        d_model: hidden size.
        num_experts: routed experts ``E``.
        top_k: routed experts per token ``k``.
        num_shared: shared experts (bookkeeping and validation only).
        norm_topk_prob: renormalise the selected weights.
    """

    def __init__(
        self,
        d_model: int,
        num_experts: int,
        top_k: int,
        num_shared: int = 0,
        norm_topk_prob: bool = False,
    ) -> None:
        super().__init__()
        _check_int("d_model", d_model, 1)
        _check_int("num_experts", num_experts, 1)
        _check_int("top_k", top_k, 1, num_experts)
        _check_int("num_shared", num_shared, 0)
        if num_shared > top_k:
            raise ValueError(f"num_shared={num_shared} must be <= top_k={top_k}")
        self.d_model, self.num_experts, self.top_k = d_model, num_experts, top_k
        self.num_shared, self.norm_topk_prob = num_shared, bool(norm_topk_prob)
        self.gate = nn.Linear(d_model, num_experts, bias=False)
        # set by selection.restrict_experts: routed experts a deployment keeps (None = all)
        self.allowed_experts: torch.Tensor | None = None

    def _restrict(self, logits: torch.Tensor) -> torch.Tensor:
        if self.allowed_experts is None:
            return logits
        return logits.masked_fill(~self.allowed_experts.to(logits.device), float("-inf"))

    def select(self, logits: torch.Tensor, pool_mask: torch.Tensor | None = None) -> RouterOutput:
        """Softmax and top-k on (already masked) logits."""
        probs = nnf.softmax(logits, dim=-1)
        weights, indices = torch.topk(probs, self.top_k, dim=-1)
        if self.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return RouterOutput(logits, probs, indices, weights, pool_mask)

    def forward(
        self,
        h: torch.Tensor,
        doc_ids: torch.Tensor | None = None,
        input_ids: torch.Tensor | None = None,
    ) -> RouterOutput:
        """Route ``h`` of shape ``(B, S, d)``; ``doc_ids`` and ``input_ids`` are ignored."""
        return self.select(self._restrict(self.gate(h)))


class DocumentPoolRouter(TopKRouter):
    """EMO router: every token of a document picks its top-k inside the document's pool.

    ``u_d = sum_{t in d} softmax(s_t)``; ``P_d = topk(u_d, m_d)`` with ``m_d`` uniform in
    ``[pool_min, pool_max]`` per document and layer during training (``pool_eval`` otherwise);
    logits outside ``P_d`` are set to ``-inf``, then softmax and top-k run as in
    :class:`TopKRouter`, so the router's gradient flows through the masked softmax.

    The pool looks ahead (it uses every token of the document), so it is a training
    regulariser: ``pool_mode="train"`` (default) pools only while ``self.training``;
    ``"always"`` and ``"never"`` exist for ablations.

    Args:
        d_model, num_experts, top_k, num_shared, norm_topk_prob: as :class:`TopKRouter`.
        pool_min, pool_max: range of training pool sizes (default ``top_k`` and ``E``).
        pool_eval: pool size outside training (default ``max(top_k, E // 4)``).
        pool_mode: ``"train"``, ``"always"`` or ``"never"``.
        eos_id: when set, ``doc_ids`` may be omitted and derived from ``input_ids``.
        generator: torch generator for the pool sizes (default: the global RNG).

    References:
        EMO: mixture-of-experts with document-level expert pools for modular, memory-efficient
        deployment (NeurIPS 2026).

    Example:
        >>> import torch
        >>> r = DocumentPoolRouter(16, 8, 2, pool_min=2, pool_max=4, pool_eval=4)
        >>> out = r(torch.randn(1, 6, 16), doc_ids=torch.tensor([[0, 0, 0, 1, 1, 1]]))
        >>> int(out.pool_mask[0, 0].sum()) in (2, 3, 4)
        True
    """

    def __init__(
        self,
        d_model: int,
        num_experts: int,
        top_k: int,
        num_shared: int = 0,
        norm_topk_prob: bool = False,
        pool_min: int | None = None,
        pool_max: int | None = None,
        pool_eval: int | None = None,
        pool_mode: str = "train",
        eos_id: int | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(d_model, num_experts, top_k, num_shared, norm_topk_prob)
        pool_min = top_k if pool_min is None else pool_min
        pool_max = num_experts if pool_max is None else pool_max
        pool_eval = max(top_k, num_experts // 4) if pool_eval is None else pool_eval
        for name, v in (("pool_min", pool_min), ("pool_max", pool_max), ("pool_eval", pool_eval)):
            _check_int(name, v, 1)
        if pool_min < top_k:
            raise ValueError(f"pool_min={pool_min} must be >= top_k={top_k} (routed experts)")
        if pool_max > num_experts:
            raise ValueError(f"pool_max={pool_max} must be <= num_experts={num_experts}")
        if pool_min > pool_max:
            raise ValueError(f"pool_min={pool_min} must be <= pool_max={pool_max}")
        if not top_k <= pool_eval <= num_experts:
            raise ValueError(f"pool_eval={pool_eval} must be in [top_k={top_k}, {num_experts}]")
        if pool_mode not in POOL_MODES:
            raise ValueError(f"pool_mode must be one of {POOL_MODES}, got {pool_mode!r}")
        self.pool_min, self.pool_max, self.pool_eval = pool_min, pool_max, pool_eval
        self.pool_mode, self.eos_id, self.generator = pool_mode, eos_id, generator

    def pooled(self) -> bool:
        """Whether the next forward applies document pools."""
        return self.pool_mode == "always" or (self.pool_mode == "train" and self.training)

    def _doc_ids(
        self, h: torch.Tensor, doc_ids: torch.Tensor | None, input_ids: torch.Tensor | None
    ) -> torch.Tensor:
        if doc_ids is None:
            if self.eos_id is None or input_ids is None:
                raise ValueError(
                    f"DocumentPoolRouter in pooled mode (pool_mode={self.pool_mode!r}, "
                    f"training={self.training}) needs doc_ids of shape (B, S), or eos_id and "
                    "input_ids to derive them"
                )
            doc_ids = doc_ids_from_eos(input_ids, self.eos_id)
        return validate_doc_ids(doc_ids, h.shape[:2])

    def forward(
        self,
        h: torch.Tensor,
        doc_ids: torch.Tensor | None = None,
        input_ids: torch.Tensor | None = None,
    ) -> RouterOutput:
        """Route ``h`` ``(B, S, d)``; ``doc_ids`` ``(B, S)`` is required when pooled."""
        logits = self._restrict(self.gate(h))
        if not self.pooled():
            return self.select(logits)
        doc_ids = self._doc_ids(h, doc_ids, input_ids)
        sizes: torch.Tensor | int
        if self.training:
            n_docs = document_index(doc_ids)[1]
            sizes = sample_pool_sizes(
                n_docs, self.pool_min, self.pool_max, self.generator, device=h.device
            )
        else:
            sizes = self.pool_eval
        mask, _ = document_pool_mask(nnf.softmax(logits, dim=-1), doc_ids, sizes)
        return self.select(apply_pool_mask(logits, mask), mask)
