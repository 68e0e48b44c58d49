"""EMO's document pool (the algorithm box): one expert pool per document, chosen by the document.

For document ``d`` with tokens ``t in d`` and full routed-expert probabilities ``p_t``:

    u_d = sum_{t in d} softmax(s_t)            (unmasked, no gradient)
    m_d ~ Uniform{m_min, ..., m_max}           (training; m_eval otherwise)
    P_d = topk(u_d, m_d)
    s_{t,e} <- -inf  for e not in P_d, t in d  (then softmax and top-k as usual)

References:
    EMO: mixture-of-experts with document-level expert pools for modular, memory-efficient
    deployment (NeurIPS 2026).
"""

from __future__ import annotations

import torch

from emo_moe.documents import document_index

__all__ = ["apply_pool_mask", "document_pool_mask", "sample_pool_sizes"]


def sample_pool_sizes(
    n_docs: int,
    pool_min: int,
    pool_max: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Pool sizes ``m_d ~ Uniform{pool_min, ..., pool_max}``, one per document (long, ``(D,)``).

    Raises:
        ValueError: If ``n_docs < 0``, ``pool_min < 1`` or ``pool_min > pool_max``.
    """
    if n_docs < 0:
        raise ValueError(f"n_docs must be >= 0, got {n_docs}")
    if not 1 <= pool_min <= pool_max:
        raise ValueError(
            f"need 1 <= pool_min <= pool_max, got pool_min={pool_min}, pool_max={pool_max}"
        )
    if generator is not None:
        sizes = torch.randint(
            pool_min, pool_max + 1, (n_docs,), generator=generator, device=generator.device
        )
        return sizes.to(device) if device is not None else sizes
    return torch.randint(pool_min, pool_max + 1, (n_docs,), device=device)


def document_pool_mask(
    probs: torch.Tensor, doc_ids: torch.Tensor, pool_sizes: torch.Tensor | int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token boolean pool mask: the top-``m_d`` experts of the document's summed probabilities.

    Args:
        probs: ``(B, S, E)`` full (unmasked) routed-expert probabilities ``softmax(s_t)``.
        doc_ids: ``(B, S)`` contiguous document ids (validated by the caller).
        pool_sizes: ``(D,)`` pool size per document in :func:`document_index` order, or one int.

    Returns:
        ``(mask, doc_pools)``: ``(B, S, E)`` bool, True where expert ``e`` is in the pool of the
        token's document, and the ``(D, E)`` per-document pools. Ties break to the lower index.
    """
    B, S, E = probs.shape
    index, n_docs = document_index(doc_ids)
    flat = index.flatten()
    with torch.no_grad():  # the pool is a set of indices: no gradient flows through it
        u = torch.zeros(n_docs, E, dtype=probs.dtype, device=probs.device)
        u.index_add_(0, flat, probs.detach().reshape(B * S, E))  # u_d = sum_t p_t
        m = torch.as_tensor(pool_sizes, device=probs.device).expand(n_docs).clamp(max=E)
        order = torch.sort(u, dim=1, descending=True, stable=True).indices
        rank_ok = torch.arange(E, device=probs.device).unsqueeze(0) < m.unsqueeze(1)
        pools = torch.zeros(n_docs, E, dtype=torch.bool, device=probs.device)
        pools.scatter_(1, order, rank_ok)  # P_d = topk(u_d, m_d)
    return pools[flat].view(B, S, E), pools


def apply_pool_mask(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Set the logits of experts outside the mask to ``-inf`` (out of place, differentiable)."""
    return logits.masked_fill(~mask, float("-inf"))
