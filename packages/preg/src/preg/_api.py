"""One-call entry point: ``preg.sample(model, tokenizer, prompt, ...)``."""

from __future__ import annotations

from typing import Any

from ._preg import PrefixGuidedSampler
from .answers import LastNumberExtractor
from .types import Prompt, RunResult

__all__ = ["sample"]


def sample(
    model: Any,
    tokenizer: Any,
    prompt: Prompt,
    n_prefixes: int = 16,
    keep: int = 4,
    prefix_len: int = 64,
    max_new_tokens: int = 1024,
    extractor: Any = None,
    **kwargs: Any,
) -> RunResult:
    """Run PreG with a ``transformers`` model and tokenizer (see :class:`PrefixGuidedSampler`).

    ``extractor`` defaults to :class:`LastNumberExtractor`; other keyword arguments go to
    :class:`PrefixGuidedSampler` (``score``, ``weight``, ``beta``, ``temperature``, ``seed``...).
    """
    from .generators.hf import HFGenerator

    gen = HFGenerator(model, tokenizer)
    sampler = PrefixGuidedSampler(
        gen,
        extractor or LastNumberExtractor(),
        n_prefixes=n_prefixes,
        prefix_len=prefix_len,
        keep=keep,
        max_new_tokens=max_new_tokens,
        **kwargs,
    )
    return sampler.run(prompt)
