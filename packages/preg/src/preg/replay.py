"""Offline evaluation of any method from a stored pool of full samples per question."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .generators.base import PoolGenerator
from .types import Path, RunResult

__all__ = ["ReplayPool", "ReplayResult"]


@dataclass
class ReplayResult:
    """Replay outcome: ``correct[r, q]`` and ``tokens[r, q]`` over resamples x questions."""

    correct: NDArray[np.float64]
    tokens: NDArray[np.float64]

    @property
    def accuracy(self) -> float:
        """Mean accuracy."""
        return float(self.correct.mean())

    @property
    def mean_tokens(self) -> float:
        """Mean generated tokens per question."""
        return float(self.tokens.mean())

    @property
    def per_question(self) -> NDArray[np.float64]:
        """Accuracy of each question averaged over resamples."""
        return self.correct.mean(axis=0)


class ReplayPool:
    """A pool of full samples per question, replayed through :class:`PoolGenerator`.

    Args:
        prompts: one prompt per question.
        paths: for each question, its stored full paths (answers may be pre-filled).
        gold: the correct answer of each question.
    """

    def __init__(
        self, prompts: Sequence[str], paths: Sequence[Sequence[Path]], gold: Sequence[Hashable]
    ) -> None:
        if not len(prompts) == len(paths) == len(gold):
            raise ValueError(
                f"prompts, paths and gold must have equal length, got "
                f"{len(prompts)}, {len(paths)}, {len(gold)}"
            )
        if len(set(prompts)) != len(prompts):
            raise ValueError("prompts must be distinct")
        self.prompts = list(prompts)
        self.gold = list(gold)
        self.pools = dict(zip(self.prompts, (list(p) for p in paths), strict=True))

    def per_sample_accuracy(self, extractor: Callable[[str], Any]) -> NDArray[np.float64]:
        """Fraction of correct stored paths per question."""
        out = []
        for q, g in zip(self.prompts, self.gold, strict=True):
            pool = self.pools[q]
            for p in pool:
                if p.answer is None:
                    p.answer = extractor(p.text)
            out.append(np.mean([p.answer == g for p in pool]))
        return np.asarray(out)

    def evaluate(
        self,
        make_method: Callable[[PoolGenerator], Any],
        resamples: int = 30,
        seed: int = 0,
    ) -> ReplayResult:
        """Run ``make_method(generator).run(prompt, seed=...)`` per question, ``resamples`` times.

        Each (resample, question) pair gets its own seed, so every method sees independent
        draws; the same ``seed`` gives the same draws.
        """
        if resamples < 1:
            raise ValueError(f"resamples must be >= 1, got {resamples}")
        gen = PoolGenerator(self.pools)
        method = make_method(gen)
        nq = len(self.prompts)
        correct = np.zeros((resamples, nq))
        tokens = np.zeros((resamples, nq))
        for r in range(resamples):
            for qi, (q, g) in enumerate(zip(self.prompts, self.gold, strict=True)):
                res: RunResult = method.run(q, seed=seed * 1_000_003 + r * 10_007 + qi)
                correct[r, qi] = float(res.answer is not None and res.answer == g)
                tokens[r, qi] = res.total_tokens
        return ReplayResult(correct, tokens)
