"""The arithmetic-chain world and a tiny character-level transformer trained from scratch."""

from .arith import VOCAB, ArithProblem, check, extract_answer, make_problem
from .tinylm import CharGPT, CharGPTConfig, train_tiny_lm

__all__ = [
    "VOCAB",
    "ArithProblem",
    "CharGPT",
    "CharGPTConfig",
    "check",
    "extract_answer",
    "make_problem",
    "train_tiny_lm",
]
