"""Expert feed-forward networks and the MoE layer that drops into a transformer block."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as nnf

from emo_moe.routing import RouterOutput, TopKRouter

__all__ = ["MoEFeedForward", "SwiGLUExpert"]


class SwiGLUExpert(nn.Module):
    """``FFN(x) = W_down (silu(W_gate x) * W_up x)``, no biases (OLMoE / Mixtral experts)."""

    def __init__(self, d_model: int, d_expert: int) -> None:
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_expert, bias=False)
        self.w_up = nn.Linear(d_model, d_expert, bias=False)
        self.w_down = nn.Linear(d_expert, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the expert to ``(..., d_model)``."""
        return self.w_down(nnf.silu(self.w_gate(x)) * self.w_up(x))


class MoEFeedForward(nn.Module):
    """Sparse MoE feed-forward: ``y_t = sum_{e in K_t} w_{t,e} FFN_e(h_t) + sum_s FFN_s(h_t)``.

    Dispatch is a loop over routed experts with ``index_add_`` (CPU friendly), the semantics of
    transformers' sparse MoE blocks. Shared experts see every token and are never routed.

    Args:
        d_model: hidden size.
        d_expert: hidden size of each expert.
        num_experts: routed experts ``E``.
        top_k: routed experts per token.
        num_shared: always-on shared experts.
        router: a :class:`TopKRouter` (or :class:`DocumentPoolRouter`) for ``E`` and ``top_k``;
            default a new ``TopKRouter``.
    """

    def __init__(
        self,
        d_model: int,
        d_expert: int,
        num_experts: int,
        top_k: int,
        num_shared: int = 0,
        router: TopKRouter | None = None,
    ) -> None:
        super().__init__()
        if router is None:
            router = TopKRouter(d_model, num_experts, top_k, num_shared)
        if not isinstance(router, TopKRouter):
            raise TypeError(f"router must be a TopKRouter, got {type(router).__name__}")
        if (router.d_model, router.num_experts, router.top_k) != (d_model, num_experts, top_k):
            raise ValueError(
                f"router has (d_model, num_experts, top_k) = "
                f"{(router.d_model, router.num_experts, router.top_k)}, layer has "
                f"{(d_model, num_experts, top_k)}"
            )
        self.d_model, self.num_experts, self.top_k = d_model, num_experts, top_k
        self.num_shared = num_shared
        self.router = router
        self.experts = nn.ModuleList(SwiGLUExpert(d_model, d_expert) for _ in range(num_experts))
        self.shared_experts = nn.ModuleList(
            SwiGLUExpert(d_model, d_expert) for _ in range(num_shared)
        )

    def dispatch(self, x: torch.Tensor, out: RouterOutput) -> torch.Tensor:
        """Routed part for flat tokens ``x`` ``(T, d)`` given the router's choices."""
        k = out.expert_indices.shape[-1]
        flat_e = out.expert_indices.reshape(-1)
        flat_w = out.expert_weights.reshape(-1)
        order = torch.argsort(flat_e, stable=True)
        counts = torch.bincount(flat_e, minlength=self.num_experts).tolist()
        y = torch.zeros_like(x)
        start = 0
        for e, n in enumerate(counts):
            if n == 0:
                continue
            slots = order[start : start + n]
            start += n
            tok = slots // k
            contrib = self.experts[e](x[tok]) * flat_w[slots].unsqueeze(-1).to(x.dtype)
            y.index_add_(0, tok, contrib)
        return y

    def forward(
        self,
        h: torch.Tensor,
        doc_ids: torch.Tensor | None = None,
        input_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, RouterOutput]:
        """``h`` ``(B, S, d)`` -> ``(y, RouterOutput)``; ``doc_ids`` feed a pooled router."""
        if h.dim() != 3 or h.shape[-1] != self.d_model:
            raise ValueError(f"h must have shape (B, S, {self.d_model}), got {tuple(h.shape)}")
        out = self.router(h, doc_ids=doc_ids, input_ids=input_ids)
        x = h.reshape(-1, self.d_model)
        y = self.dispatch(x, out)
        for shared in self.shared_experts:
            y = y + shared(x)
        return y.view_as(h), out
