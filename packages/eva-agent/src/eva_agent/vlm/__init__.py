"""VLM back-ends: the protocol, the labelled simulator, HF transformers, OpenAI-compatible."""

from eva_agent.vlm.base import (
    VLM,
    ImageNotSupportedError,
    ReplyParseError,
    answer_prompt,
    parse_reply,
    plan_prompt,
    render_ledger,
)
from eva_agent.vlm.hf import HFVLM
from eva_agent.vlm.openai_compat import OpenAIVLM
from eva_agent.vlm.sim import SimParams, SimulatedVLM

__all__ = [
    "HFVLM",
    "VLM",
    "ImageNotSupportedError",
    "OpenAIVLM",
    "ReplyParseError",
    "SimParams",
    "SimulatedVLM",
    "answer_prompt",
    "parse_reply",
    "plan_prompt",
    "render_ledger",
]
