"""Arithmetic chains: ``Q51-8-3-3+2?`` -> ``51-8=43;43-3=40;40-3=37;37+2=39;A39.``."""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

__all__ = ["VOCAB", "ArithProblem", "check", "extract_answer", "make_problem"]

VOCAB = "0123456789+-=;AQ?."
_ANSWER = re.compile(r"A(\d+)\.")


@dataclass(frozen=True)
class ArithProblem:
    """One problem: the prompt, the reference chain of thought and the answer."""

    prompt: str
    completion: str
    answer: int


def make_problem(
    rng: np.random.Generator, steps: int = 4, operand_range: tuple[int, int] = (2, 9)
) -> ArithProblem:
    """Draw a problem: start in 10..99, ``steps`` steps of +/- a digit, never negative.

    Raises:
        ValueError: ``steps < 1`` or operands outside single digits.
    """
    lo, hi = operand_range
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if not 0 <= lo <= hi <= 9:
        raise ValueError(f"operand_range must be single digits lo <= hi, got {operand_range}")
    x = int(rng.integers(10, 100))
    prompt, chain = f"Q{x}", []
    for _ in range(steps):
        d = int(rng.integers(lo, hi + 1))
        op = "+" if (rng.random() < 0.5 or x - d < 0) else "-"
        y = x + d if op == "+" else x - d
        prompt += f"{op}{d}"
        chain.append(f"{x}{op}{d}={y};")
        x = y
    return ArithProblem(prompt + "?", "".join(chain) + f"A{x}.", x)


def extract_answer(text: str) -> Hashable | None:
    """The integer after ``A`` (terminated by ``.``), or ``None``."""
    m = _ANSWER.search(text)
    return int(m.group(1)) if m else None


def check(answer: Hashable | None, problem: ArithProblem) -> bool:
    """Whether ``answer`` is the problem's answer."""
    return answer is not None and answer == problem.answer
