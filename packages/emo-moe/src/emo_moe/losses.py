"""Auxiliary router losses: global-batch load balancing and router z-loss."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from emo_moe.routing import RouterOutput

__all__ = ["GRANULARITIES", "global_load_balancing_loss", "router_z_loss"]

GRANULARITIES = ("global", "sequence")


def _all_reduce(x: torch.Tensor, group: Any) -> torch.Tensor:
    import torch.distributed as dist

    x = x.detach().clone()
    dist.all_reduce(x, group=group)
    return x


def _layer_loss(
    out: RouterOutput, num_experts: int, top_k: int, granularity: str, group: Any
) -> torch.Tensor:
    probs = out.probs.to(torch.promote_types(out.probs.dtype, torch.float32))
    idx = out.expert_indices
    if granularity == "sequence":  # ablation: one balance term per row, then averaged
        B = probs.shape[0]
        counts = torch.zeros(B, num_experts, device=probs.device)
        counts.scatter_add_(
            1, idx.reshape(B, -1), torch.ones(idx.reshape(B, -1).shape, device=probs.device)
        )
        f = counts / probs.shape[1]
        p_bar = probs.mean(dim=1)
        return (num_experts / top_k) * (f * p_bar).sum(dim=-1).mean()
    counts = torch.bincount(idx.reshape(-1), minlength=num_experts).to(probs.dtype)
    p_sum = probs.reshape(-1, num_experts).sum(dim=0)
    n_tok = torch.tensor(
        float(probs.shape[0] * probs.shape[1]), dtype=probs.dtype, device=probs.device
    )
    if group is not None:
        counts, n_tok = _all_reduce(counts, group), _all_reduce(n_tok, group)
        # the value is the global mean; the gradient comes from this rank's tokens
        p_sum = p_sum + (_all_reduce(p_sum, group) - p_sum.detach())
    f = counts / n_tok  # tokens routed to e / all tokens (a token counts k times in total)
    p_bar = p_sum / n_tok
    return (num_experts / top_k) * (f * p_bar).sum()


def global_load_balancing_loss(
    router_outputs: Sequence[RouterOutput],
    num_experts: int,
    top_k: int,
    process_group: Any = None,
    granularity: str = "global",
) -> torch.Tensor:
    """``L_lb = (E / k) sum_e f_e P_bar_e``, counted over the whole global batch, mean over layers.

    ``f_e`` is the number of tokens routed to ``e`` over the number of tokens and ``P_bar_e``
    the mean routed probability (after any pool mask), both over every row of the batch (and
    all ranks of ``process_group`` when given). Perfectly uniform routing gives 1. Shared
    experts are not routed and so are not balanced. ``granularity="sequence"`` computes one term
    per row instead (an ablation: it fights the document pools).

    Raises:
        ValueError: On an empty list or an unknown granularity.
    """
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
    if len(router_outputs) == 0:
        raise ValueError("router_outputs is empty: pass one RouterOutput per MoE layer")
    losses = [
        _layer_loss(o, num_experts, top_k, granularity, process_group) for o in router_outputs
    ]
    return torch.stack(losses).mean()


def router_z_loss(router_outputs: Sequence[RouterOutput]) -> torch.Tensor:
    """Mean over tokens and layers of ``logsumexp(s_t)^2`` (ST-MoE), on the masked logits."""
    if len(router_outputs) == 0:
        raise ValueError("router_outputs is empty: pass one RouterOutput per MoE layer")
    return torch.stack(
        [torch.logsumexp(o.logits.float(), dim=-1).pow(2).mean() for o in router_outputs]
    ).mean()
