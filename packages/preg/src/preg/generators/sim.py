"""PathSimulator: a calibrated simulator of scored reasoning paths, not a language model.

Each question has a difficulty ``p ~ Beta(a, b)`` (per-path accuracy); a path is correct with
probability ``p``, otherwise it gives one of ``n_wrong`` wrong answers, the first (the
attractor) taking ``attractor`` of the wrong mass. Token "log-probs" are built so that the mean
over the first ``prefix_len`` tokens is ``N(delta_prefix [correct], 1)`` and the mean over the
whole path is ``N(delta_full [correct], 1)`` (shifted by ``offset``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..types import Path
from .base import PoolGenerator

__all__ = ["PathSimulator", "SimConfig", "SimQuestion"]


@dataclass(frozen=True)
class SimConfig:
    """Simulator settings."""

    n_questions: int = 200
    pool_size: int = 64
    length: int = 32
    prefix_len: int = 8
    delta_prefix: float = 0.5
    delta_full: float = 1.0
    n_wrong: int = 4
    attractor: float = 0.5
    beta_a: float = 2.0
    beta_b: float = 2.0
    offset: float = -1.0


@dataclass
class SimQuestion:
    """A simulated question: prompt, correct answer, difficulty and its stored paths."""

    prompt: str
    answer: int
    p: float
    paths: list[Path]


class PathSimulator:
    """Draws questions with pools of synthetic scored paths (text ``"...A<answer>."``).

    Args:
        config: settings (:class:`SimConfig`).
        seed: seed of all draws.
    """

    def __init__(self, config: SimConfig | None = None, seed: int = 0) -> None:
        self.config = c = config or SimConfig()
        if not 1 <= c.prefix_len < c.length:
            raise ValueError(f"need 1 <= prefix_len < length, got {c.prefix_len}, {c.length}")
        rng = np.random.default_rng(seed)
        self.questions: list[SimQuestion] = []
        wrong_p = np.full(c.n_wrong, (1 - c.attractor) / max(c.n_wrong - 1, 1))
        wrong_p[0] = c.attractor if c.n_wrong > 1 else 1.0
        for q in range(c.n_questions):
            p = float(rng.beta(c.beta_a, c.beta_b))
            correct = rng.random(c.pool_size) < p
            wrong = rng.choice(c.n_wrong, size=c.pool_size, p=wrong_p / wrong_p.sum())
            sp = rng.standard_normal(c.pool_size) + c.delta_prefix * correct
            sf = rng.standard_normal(c.pool_size) + c.delta_full * correct
            paths = []
            for i in range(c.pool_size):
                ans = 0 if correct[i] else int(wrong[i]) + 1
                lp = np.empty(c.length)
                lp[: c.prefix_len] = sp[i]
                lp[c.prefix_len :] = (c.length * sf[i] - c.prefix_len * sp[i]) / (
                    c.length - c.prefix_len
                )
                texts = ["."] * (c.length - 1) + [f"A{ans}."]
                paths.append(
                    Path(
                        [],
                        "".join(texts),
                        lp + c.offset,
                        finished=True,
                        answer=ans,
                        token_texts=texts,
                    )
                )
            self.questions.append(SimQuestion(f"q{q}", 0, p, paths))

    def pools(self) -> dict[str, list[Path]]:
        """Prompt -> stored paths."""
        return {q.prompt: q.paths for q in self.questions}

    def generator(self, seed: int | None = None) -> PoolGenerator:
        """A :class:`PoolGenerator` over the simulated pools."""
        return PoolGenerator(self.pools(), seed)
