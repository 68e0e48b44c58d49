"""EVA: an evidence-seeking visual agent (tool replanning, evidence verification, routing).

The method (:class:`EVAgent`) is in ``_eva.py``; tools in :mod:`eva_agent.tools`; VLM
back-ends (including the labelled simulator) in :mod:`eva_agent.vlm`; the ShapeTextVQA world
in :mod:`eva_agent.world`.
"""

from importlib.metadata import version as _version

from eva_agent import baselines, metrics, tools, vlm, world
from eva_agent._eva import EVAgent
from eva_agent.replan import Assessment, IterativeReplanner, assess, sufficient
from eva_agent.router import AlwaysSlow, LogisticRouter, ThresholdRouter, calibrate_tau
from eva_agent.tools import (
    Calculator,
    CropZoom,
    HFZeroShotDetector,
    RapidOCRTool,
    ShapeColorDetector,
    TesseractTool,
    ToolCache,
)
from eva_agent.types import AgentResult, Evidence, Final, Observation, QAItem, ToolCall, Verdict
from eva_agent.verify import EvidenceVerifier, check, extract_claim, fuzzy_match, normalise
from eva_agent.vlm import HFVLM, OpenAIVLM, SimParams, SimulatedVLM
from eva_agent.world import ShapeTextVQA

__version__ = _version("eva-agent")

__all__ = [
    "HFVLM",
    "AgentResult",
    "AlwaysSlow",
    "Assessment",
    "Calculator",
    "CropZoom",
    "EVAgent",
    "Evidence",
    "EvidenceVerifier",
    "Final",
    "HFZeroShotDetector",
    "IterativeReplanner",
    "LogisticRouter",
    "Observation",
    "OpenAIVLM",
    "QAItem",
    "RapidOCRTool",
    "ShapeColorDetector",
    "ShapeTextVQA",
    "SimParams",
    "SimulatedVLM",
    "TesseractTool",
    "ThresholdRouter",
    "ToolCache",
    "ToolCall",
    "Verdict",
    "__version__",
    "assess",
    "baselines",
    "calibrate_tau",
    "check",
    "extract_claim",
    "fuzzy_match",
    "metrics",
    "normalise",
    "sufficient",
    "tools",
    "vlm",
    "world",
]
