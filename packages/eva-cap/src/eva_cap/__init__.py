"""EVA-Cap: event-centric audiovisual captioning with SFT and GRPO on event rewards.

Captions are decomposed into atomic audiovisual events; SFT runs on event-quality-controlled
captions, then GRPO optimises three verifiable event rewards (completeness, attribution,
synchronisation). Paper: EVA-Cap (NeurIPS 2026); the formulas here are inferred.
"""

from importlib.metadata import version as _version

from eva_cap import baselines, synthetic
from eva_cap._eva_cap import EVACapResult, eva_cap_train, grpo_train
from eva_cap.decompose import (
    DEFAULT_PROMPT,
    Decomposer,
    GrammarDecomposer,
    LLMDecomposer,
    ParsedCaption,
)
from eva_cap.events import (
    MODALITIES,
    AtomicEvent,
    EventSet,
    Relation,
    relations_from_caption_order,
    relations_from_intervals,
)
from eva_cap.grpo import GRPOConfig, GRPOTrainer, group_advantages, grpo_token_loss
from eva_cap.matching import Matching, exact_similarity, match_events
from eva_cap.metrics import (
    attribution_accuracy,
    evaluate_captions,
    event_f1,
    order_kendall_tau,
    parse_rate,
    sync_accuracy,
)
from eva_cap.policy import CaptionPolicy, HFCausalPolicy, HFSeq2SeqPolicy, index_batch
from eva_cap.rewards import (
    EventRewards,
    attribution_reward,
    completeness_reward,
    format_reward,
    sync_reward,
    trl_reward_funcs,
)
from eva_cap.sft import quality_control, sft_train

__version__ = _version("eva-cap")

__all__ = [
    "DEFAULT_PROMPT",
    "MODALITIES",
    "AtomicEvent",
    "CaptionPolicy",
    "Decomposer",
    "EVACapResult",
    "EventRewards",
    "EventSet",
    "GRPOConfig",
    "GRPOTrainer",
    "GrammarDecomposer",
    "HFCausalPolicy",
    "HFSeq2SeqPolicy",
    "LLMDecomposer",
    "Matching",
    "ParsedCaption",
    "Relation",
    "__version__",
    "attribution_accuracy",
    "attribution_reward",
    "baselines",
    "completeness_reward",
    "eva_cap_train",
    "evaluate_captions",
    "event_f1",
    "exact_similarity",
    "format_reward",
    "group_advantages",
    "grpo_token_loss",
    "grpo_train",
    "index_batch",
    "match_events",
    "order_kendall_tau",
    "parse_rate",
    "quality_control",
    "relations_from_caption_order",
    "relations_from_intervals",
    "sft_train",
    "sync_accuracy",
    "sync_reward",
    "synthetic",
    "trl_reward_funcs",
]
