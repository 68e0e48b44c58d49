"""Modularity measures: per-domain loss, expert-usage vectors and domain purity (NMI)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as nnf

from emo_moe.corpus import ByteTokenizer, pack_documents
from methodkit import progress as show_progress

__all__ = ["domain_losses", "expert_usage_matrix", "modularity_nmi", "rows_loss"]


def _check_batch_size(batch_size: object) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")


@torch.no_grad()
def rows_loss(
    model: nn.Module,
    rows: torch.Tensor,
    batch_size: int = 32,
    pad_id: int = 257,
    progress: bool | None = None,
) -> float:
    """Mean next-token loss (nats per byte) over packed ``rows``, PAD targets ignored.

    ``progress`` shows a bar over the batches: ``None`` (default) on a terminal only,
    ``True`` always, ``False`` never.
    """
    _check_batch_size(batch_size)
    was = model.training
    model.eval()
    total, count = 0.0, 0
    starts = range(0, rows.shape[0], batch_size)
    try:
        for i in show_progress(starts, enabled=progress, desc="loss", total=len(starts)):
            x = rows[i : i + batch_size]
            logits = model(x)["logits"][:, :-1]
            tgt = x[:, 1:]
            keep = tgt != pad_id
            ce = nnf.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), reduction="none"
            ).view_as(tgt)
            total += float(ce[keep].sum())
            count += int(keep.sum())
    finally:
        model.train(was)
    return total / max(count, 1)


def domain_losses(
    model: nn.Module,
    documents: Mapping[str, Sequence[str]],
    seq_len: int,
    max_rows: int | None = None,
    batch_size: int = 32,
    progress: bool | None = None,
) -> dict[str, float]:
    """Test loss per domain in nats per byte: each domain's documents packed into rows.

    ``progress`` shows a bar over the domains (``None``: on a terminal only).

    Raises:
        ValueError: If a domain has no documents.
    """
    out = {}
    for dom, docs in show_progress(
        documents.items(), enabled=progress, desc="domain losses", total=len(documents)
    ):
        if not docs:
            raise ValueError(f"domain {dom!r} has no documents")
        rows = pack_documents(docs, seq_len, drop_last=False)
        out[dom] = rows_loss(model, rows[:max_rows] if max_rows else rows, batch_size)
    return out


@torch.no_grad()
def expert_usage_matrix(
    model: nn.Module,
    documents: Sequence[str],
    max_len: int,
    batch_size: int = 32,
    progress: bool | None = None,
) -> np.ndarray:
    """Per-document expert usage: layer-concatenated mean routed probabilities ``(N, L * E)``.

    Each document is truncated to ``max_len`` bytes and run alone in its row (plain top-k
    routing, eval mode); PAD positions are excluded from the mean. ``progress`` shows a bar
    over the batches (``None``: on a terminal only).

    Raises:
        ValueError: If ``documents`` is empty.
    """
    if len(documents) == 0:
        raise ValueError("documents is empty")
    if isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1:
        raise ValueError(f"max_len must be an int >= 1, got {max_len!r}")
    _check_batch_size(batch_size)
    tok = ByteTokenizer()
    was = model.training
    model.eval()
    feats = []
    try:
        starts = range(0, len(documents), batch_size)
        for i in show_progress(starts, enabled=progress, desc="expert usage", total=len(starts)):
            enc = [tok.encode(d)[:max_len] for d in documents[i : i + batch_size]]
            n = max(len(e) for e in enc)
            ids = torch.full((len(enc), n), tok.pad_id, dtype=torch.long)
            for j, e in enumerate(enc):
                ids[j, : len(e)] = torch.tensor(e, dtype=torch.long)
            keep = (ids != tok.pad_id).float().unsqueeze(-1)
            outs = model(ids, output_router_logits=True)["router_outputs"]
            per_layer = [(o.probs * keep).sum(1) / keep.sum(1).clamp_min(1) for o in outs]
            feats.append(torch.cat(per_layer, dim=-1))
    finally:
        model.train(was)
    return torch.cat(feats).double().numpy()


def modularity_nmi(
    usage: np.ndarray, labels: Sequence, k: int | None = None, random_state: int = 0
) -> float:
    """Domain purity: NMI between true domains and k-means clusters of expert-usage vectors.

    Raises:
        ValueError: Mismatched lengths, NaN/inf usage or fewer documents than clusters.
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import normalized_mutual_info_score

    usage = np.asarray(usage, dtype=np.float64)
    lab = np.asarray(labels)
    if usage.ndim != 2 or usage.shape[0] != lab.shape[0]:
        raise ValueError(f"usage {usage.shape} and labels {lab.shape} do not match")
    if not np.isfinite(usage).all():
        raise ValueError(f"usage holds {int((~np.isfinite(usage)).sum())} NaN/inf value(s)")
    k = len(np.unique(lab)) if k is None else k
    if usage.shape[0] < k:
        raise ValueError(f"need at least k={k} documents, got {usage.shape[0]}")
    pred = KMeans(n_clusters=k, n_init=10, random_state=random_state).fit_predict(usage)
    return float(normalized_mutual_info_score(lab, pred))
