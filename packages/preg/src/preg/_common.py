"""Shared validation and scoring helpers of the methods and baselines."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from .confidence import AGGREGATIONS, KINDS, path_score
from .types import Path

Extractor = Callable[[str], Hashable | None]


def check_generator(generator: Any, needs_logprobs: bool) -> None:
    for name in ("sample", "continue_"):
        if not callable(getattr(generator, name, None)):
            raise TypeError(f"generator must have a callable .{name}(), got {type(generator)!r}")
    if needs_logprobs and not getattr(generator, "supports_logprobs", False):
        raise ValueError(
            "this method needs token log-probabilities but the generator reports "
            "supports_logprobs=False (vLLM: keep --max-logprobs >= top_logprobs; llama.cpp: "
            "request n_probs / logprobs)"
        )


def check_prompt(prompt: Any) -> None:
    """A prompt is a string or a non-empty sequence of chat messages (mappings)."""
    if isinstance(prompt, str):
        return
    if isinstance(prompt, Sequence) and len(prompt) > 0 and all(hasattr(m, "keys") for m in prompt):
        return
    raise TypeError(
        "prompt must be a str or a non-empty list of chat messages "
        f"({{'role': ..., 'content': ...}}), got {type(prompt).__name__}"
    )


def check_score(score: str, score_agg: str, window: int) -> None:
    if score not in KINDS:
        raise ValueError(f"score must be one of {KINDS}, got {score!r}")
    if score_agg not in AGGREGATIONS:
        raise ValueError(f"score_agg must be one of {AGGREGATIONS}, got {score_agg!r}")
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")


def check_n(name: str, n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise TypeError(f"{name} must be an int, got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"{name} must be >= 1, got {n}")


def check_sampling(temperature: float, top_p: float, n: int) -> None:
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if not 0.0 < top_p <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    if temperature == 0 and n > 1:
        warnings.warn(
            f"temperature=0 with n={n}: greedy decoding gives identical paths",
            UserWarning,
            stacklevel=3,
        )


def keep_count(n: int, keep: int | None, keep_frac: float | None) -> int:
    if keep is not None and keep_frac is not None:
        raise ValueError("give keep or keep_frac, not both")
    if keep_frac is not None:
        if not 0.0 < keep_frac <= 1.0:
            raise ValueError(f"keep_frac must be in (0, 1], got {keep_frac}")
        return max(1, math.ceil(keep_frac * n - 1e-9))
    if keep is None:
        raise ValueError("give keep or keep_frac")
    check_n("keep", keep)
    if keep > n:
        raise ValueError(f"keep={keep} must be <= n_prefixes={n}")
    return int(keep)


def extract(paths: Sequence[Path], extractor: Extractor) -> list[Hashable | None]:
    out = []
    for p in paths:
        if p.answer is None:
            p.answer = extractor(p.text)
        if p.answer is not None and not isinstance(p.answer, Hashable):
            raise TypeError(
                f"the extractor returned an unhashable {type(p.answer).__name__}; return a "
                "hashable value (str, int, tuple) or None"
            )
        out.append(p.answer)
    return out


def scores(
    paths: Sequence[Path], score: str, score_agg: str, window: int, k: int = 20
) -> list[float]:
    return [
        path_score(p, score, score_agg, window=window, k=k) if p.n_tokens else -math.inf
        for p in paths
    ]


def derive_seed(seed: int | None, stage: int) -> int | None:
    """The seed of stage ``stage`` of a run seeded with ``seed`` (None stays None).

    NumPy's ``SeedSequence`` hash of ``(seed, stage)``, kept (rather than
    ``methodkit.derive_seed``) because it fixes the random streams of the committed benchmark
    records; the result seeds NumPy back-ends as well as ``methodkit.torch.generator``.
    """
    if seed is None:
        return None
    return int(np.random.SeedSequence([seed, stage]).generate_state(1)[0])
