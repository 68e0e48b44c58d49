"""EMO: mixture-of-experts with document-level expert pools (NeurIPS 2026).

All tokens of a document choose their experts from a pool shared by that document, so expert
groups aligned with domains emerge from document boundaries alone and a 25 % or 12.5 % subset
of the experts can later be kept for a domain.
"""

from importlib.metadata import version as _version

from emo_moe import baselines
from emo_moe._emo import apply_pool_mask, document_pool_mask, sample_pool_sizes
from emo_moe.corpus import (
    DOMAINS,
    ByteTokenizer,
    OfflineCorpus,
    build_offline_corpus,
    pack_documents,
    split_documents,
)
from emo_moe.documents import (
    doc_ids_from_cu_seqlens,
    doc_ids_from_eos,
    doc_ids_from_position_ids,
    document_index,
    validate_doc_ids,
)
from emo_moe.layers import MoEFeedForward, SwiGLUExpert
from emo_moe.losses import global_load_balancing_loss, router_z_loss
from emo_moe.metrics import domain_losses, expert_usage_matrix, modularity_nmi, rows_loss
from emo_moe.model import TinyMoEConfig, TinyMoELM
from emo_moe.routing import DocumentPoolRouter, RouterOutput, TopKRouter
from emo_moe.selection import (
    expert_importance,
    hf_router_logits,
    prune_experts,
    restrict_experts,
    restrict_hf_experts,
    select_expert_subset,
)

__version__ = _version("emo-moe")

__all__ = [
    "DOMAINS",
    "ByteTokenizer",
    "DocumentPoolRouter",
    "MoEFeedForward",
    "OfflineCorpus",
    "RouterOutput",
    "SwiGLUExpert",
    "TinyMoEConfig",
    "TinyMoELM",
    "TopKRouter",
    "__version__",
    "apply_pool_mask",
    "baselines",
    "build_offline_corpus",
    "doc_ids_from_cu_seqlens",
    "doc_ids_from_eos",
    "doc_ids_from_position_ids",
    "document_index",
    "document_pool_mask",
    "domain_losses",
    "expert_importance",
    "expert_usage_matrix",
    "global_load_balancing_loss",
    "hf_router_logits",
    "modularity_nmi",
    "pack_documents",
    "prune_experts",
    "restrict_experts",
    "restrict_hf_experts",
    "router_z_loss",
    "rows_loss",
    "sample_pool_sizes",
    "select_expert_subset",
    "split_documents",
    "validate_doc_ids",
]
