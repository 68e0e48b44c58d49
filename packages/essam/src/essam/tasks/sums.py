"""Few-shot single-digit sums (``Q: a + b`` / ``A: c``): a reward task for instruct LMs.

SmolLM2-135M-Instruct answers about 40 % of these right with four shots, inside the 20-60 %
start band the ESSAM benchmark asks for. The 100 operand pairs are split once (seeded) into
``train`` (70 pairs) and ``test`` (30 pairs); shots always come from the training pairs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["SPLITS", "first_integer", "make_sum_prompts", "split_pairs", "sum_reward"]

SPLITS = ("train", "test")
_INT = re.compile(r"-?\d+")
_PAIRS = [(a, b) for a in range(10) for b in range(10)]
_ORDER = np.random.default_rng(0).permutation(len(_PAIRS))
_SPLIT_PAIRS = {
    "train": [_PAIRS[i] for i in _ORDER[:70]],
    "test": [_PAIRS[i] for i in _ORDER[70:]],
}


def split_pairs(split: str) -> list[tuple[int, int]]:
    """The operand pairs ``(a, b)`` of ``split`` (70 for ``train``, 30 for ``test``)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    return list(_SPLIT_PAIRS[split])


def _line(a: int, b: int) -> str:
    return f"Q: {a} + {b}\nA:"


def make_sum_prompts(n: int, split: str, seed: int = 0, shots: int = 4) -> list[dict[str, Any]]:
    """``n`` rows ``{"prompt", "answer"}``: ``shots`` solved training sums, then the question.

    Raises:
        ValueError: On an unknown ``split``, ``n`` < 1 or ``shots`` < 0.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if n < 1 or shots < 0:
        raise ValueError(f"need n >= 1 and shots >= 0, got {n=}, {shots=}")
    rng = np.random.default_rng(seed)
    pool, train = _SPLIT_PAIRS[split], _SPLIT_PAIRS["train"]
    rows = []
    for _ in range(n):
        a, b = pool[rng.integers(len(pool))]
        others = [p for p in train if p != (a, b)]
        picks = [others[i] for i in rng.choice(len(others), shots, replace=False)]
        context = "".join(f"{_line(x, y)} {x + y}\n" for x, y in picks)
        rows.append({"prompt": context + _line(a, b), "answer": a + b})
    return rows


def first_integer(text: str) -> int | None:
    """The first integer in ``text`` (``None`` if there is none)."""
    m = _INT.search(text)
    return int(m.group()) if m else None


def sum_reward(
    prompts: Sequence[str],
    completions: Sequence[str],
    answer: Sequence[Any],
    partial: bool = False,
    **_: Any,
) -> list[float]:
    """TRL-style reward: 1.0 when the completion's first integer is the answer, else 0.0.

    With ``partial=True`` a wrong number earns ``0.5 * max(0, 1 - |pred - answer| / 10)``.

    Raises:
        ValueError: If ``completions`` and ``answer`` differ in length.
    """
    if len(completions) != len(answer):
        raise ValueError(f"{len(completions)} completions for {len(answer)} answers")
    out = []
    for text, ans in zip(completions, answer, strict=True):
        pred = first_integer(text)
        if pred is not None and pred == int(ans):
            out.append(1.0)
        elif partial and pred is not None:
            out.append(0.5 * max(0.0, 1.0 - abs(pred - int(ans)) / 10))
        else:
            out.append(0.0)
    return out
