"""Arithmetic word problems generated in code, an exact-match reward and a character tokenizer.

Splits (spec "small-scale reproduction"): ``"sft"`` one- and two-step problems on 0-20,
``"rl_train"`` / ``"rl_test"`` two- and three-step problems (disjoint by a hash of the
numbers), ``"ood"`` unseen templates with numbers 21-40. The target text is a short worked
line per operation and ``#### <answer>``, e.g. ``" 7+5=12 12-3=9 #### 9"``.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "EOS",
    "VOCAB",
    "CharTokenizer",
    "correctness_reward",
    "extract_answer",
    "make_problems",
    "partial_reward",
]

EOS = "\n"
PAD = "\x00"
VOCAB = (
    PAD + EOS + " " + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,?!:;'+-*=#()"
)
NAMES = ("Ana", "Ben", "Cy", "Dee", "Eli", "Fay", "Gus", "Ivy")
ITEMS = ("pens", "cups", "eggs", "keys", "apples", "books")
SPLITS = ("sft", "rl_train", "rl_test", "ood")

# in-distribution phrasings: (start, +k, -k, *k)
TEMPLATES = {
    "start": "{n} has {a} {it}.",
    "+": " Gets {b} more.",
    "-": " Loses {b}.",
    "*": " Then has {b} times as many.",
    "q": " How many {it}?",
}
OOD_TEMPLATES = {
    "start": "There are {a} {it} with {n}.",
    "+": " {n} finds {b}.",
    "-": " {n} gives away {b}.",
    "*": " The {it} multiply by {b}.",
    "q": " Count the {it}.",
}


def _sample_ops(rng: np.random.Generator, n_ops: int, lo: int, hi: int) -> tuple[int, list]:
    while True:
        a = int(rng.integers(lo, hi + 1))
        value, ops = a, []
        ok = True
        for _ in range(n_ops):
            op = str(rng.choice(["+", "-", "*"]))
            if op == "*":
                b = int(rng.integers(2, 6))
                value *= b
            elif op == "+":
                b = int(rng.integers(lo, hi + 1))
                value += b
            else:
                b = int(rng.integers(lo, hi + 1))
                value -= b
            ops.append((op, b))
            if value < 0 or value > 999:
                ok = False
        if ok:
            return a, ops


def _in_test(a: int, ops: list) -> bool:
    key = f"{a}|" + "|".join(f"{o}{b}" for o, b in ops)
    return zlib.crc32(key.encode()) % 4 == 0


def make_problems(
    n: int,
    split: str = "rl_train",
    seed: int = 0,
    templates: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Generate ``n`` word problems.

    Args:
        n: Number of problems (>= 1).
        split: One of ``"sft"``, ``"rl_train"``, ``"rl_test"``, ``"ood"``.
        seed: Random seed (numpy ``default_rng``).
        templates: Optional phrasing dict with keys ``start``, ``+``, ``-``, ``*``, ``q``
            (fields ``{n}`` name, ``{a}``/``{b}`` numbers, ``{it}`` item).

    Returns:
        Dicts with ``prompt`` (ends with ``" A:"``), ``answer`` (int) and ``target`` (the
        completion text, ending with the EOS character).

    Raises:
        ValueError: On an unknown split or ``n`` < 1.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    tpl = templates or (OOD_TEMPLATES if split == "ood" else TEMPLATES)
    lo, hi = (21, 40) if split == "ood" else (0, 20)
    rng = np.random.default_rng([seed, SPLITS.index(split)])
    out: list[dict[str, Any]] = []
    while len(out) < n:
        n_ops = int(rng.integers(1, 3)) if split == "sft" else int(rng.integers(2, 4))
        a, ops = _sample_ops(rng, n_ops, lo, hi)
        if split in ("rl_train", "rl_test") and _in_test(a, ops) != (split == "rl_test"):
            continue
        name, item = str(rng.choice(NAMES)), str(rng.choice(ITEMS))
        text = tpl["start"].format(n=name, a=a, it=item)
        value, steps = a, []
        for op, b in ops:
            text += tpl[op].format(n=name, b=b, it=item)
            new = value * b if op == "*" else value + b if op == "+" else value - b
            steps.append(f"{value}{op}{b}={new}")
            value = new
        text += tpl["q"].format(n=name, it=item)
        out.append(
            {
                "prompt": text + " A:",
                "answer": value,
                "target": " " + " ".join(steps) + f" #### {value}{EOS}",
            }
        )
    return out


_ANSWER = re.compile(r"####\s*(-?\d+)")


def extract_answer(text: str) -> int | None:
    """The integer after the first ``####`` in ``text`` (``None`` if there is none)."""
    m = _ANSWER.search(text)
    return int(m.group(1)) if m else None


def correctness_reward(
    prompts: Sequence[str], completions: Sequence[str], answer: Sequence[Any], **_: Any
) -> list[float]:
    """Exact-match reward, TRL reward-function signature: 1.0 if the answer matches, else 0.0.

    Raises:
        ValueError: If ``completions`` and ``answer`` differ in length.
    """
    if len(completions) != len(answer):
        raise ValueError(f"{len(completions)} completions for {len(answer)} answers")
    return [float(extract_answer(c) == int(a)) for c, a in zip(completions, answer, strict=True)]


def partial_reward(
    prompts: Sequence[str], completions: Sequence[str], answer: Sequence[Any], **_: Any
) -> list[float]:
    """1 for an exact match, else ``0.5 * max(0, 1 - |pred - answer| / 10)`` (0 if no number)."""
    if len(completions) != len(answer):
        raise ValueError(f"{len(completions)} completions for {len(answer)} answers")
    out = []
    for c, a in zip(completions, answer, strict=True):
        pred = extract_answer(c)
        if pred is None:
            out.append(0.0)
        elif pred == int(a):
            out.append(1.0)
        else:
            out.append(0.5 * max(0.0, 1.0 - abs(pred - int(a)) / 10.0))
    return out


def CharTokenizer() -> Any:  # noqa: N802 - factory named like the class it returns
    r"""A ``transformers.PreTrainedTokenizerFast`` over the fixed character vocabulary.

    Built in code (no download): one token per character of :data:`VOCAB`, pad = ``"\\x00"``,
    eos = ``"\\n"``, unknown characters map to ``"?"``, left padding, decoding concatenates
    characters.

    Raises:
        ImportError: If ``transformers``/``tokenizers`` are missing (``pip install essam[hf]``).
    """
    try:
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("CharTokenizer needs transformers: pip install 'essam[hf]'") from exc
    vocab = {ch: i for i, ch in enumerate(VOCAB)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="?"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, eos_token=EOS, unk_token="?", padding_side="left"
    )
    return fast
