"""preg: Prefix-Guided Sampling for parallel test-time scaling of language models."""

from importlib.metadata import PackageNotFoundError, version

from ._api import sample
from ._preg import PrefixGuidedSampler
from .answers import (
    AnswerExtractor,
    BoxedExtractor,
    LastNumberExtractor,
    RegexExtractor,
    normalize_numeric,
)
from .baselines import BestOfN, DeepConfOffline, PrefixConfidenceBestOf, SelfConsistency
from .budget import TokenLedger, equal_budget_sc
from .confidence import aggregate, path_score, token_confidence
from .generators import Generator, PoolGenerator
from .replay import ReplayPool, ReplayResult
from .types import Path, Prompt, RunResult
from .voting import majority_vote, scores_to_weights, weighted_vote

try:
    __version__ = version("preg")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "AnswerExtractor",
    "BestOfN",
    "BoxedExtractor",
    "DeepConfOffline",
    "Generator",
    "LastNumberExtractor",
    "Path",
    "PoolGenerator",
    "PrefixConfidenceBestOf",
    "PrefixGuidedSampler",
    "Prompt",
    "RegexExtractor",
    "ReplayPool",
    "ReplayResult",
    "RunResult",
    "SelfConsistency",
    "TokenLedger",
    "__version__",
    "aggregate",
    "equal_budget_sc",
    "majority_vote",
    "normalize_numeric",
    "path_score",
    "sample",
    "scores_to_weights",
    "token_confidence",
    "weighted_vote",
]
