"""Which instruction tokens belong to the referring expression (the set T_r)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from edit_ris.backbones.base import TokenBatch

#: Words whose tokens are dropped from T_r: they attract attention mass (RefAM) without
#: locating the referent.
STOP_WORDS = frozenset(
    [
        "the",
        "a",
        "an",
        "of",
        "to",
        "in",
        "on",
        "at",
        "with",
        "and",
        "or",
        "is",
        "are",
        "this",
        "that",
        "its",
        "it",
        "by",
        "for",
        "from",
    ]
)
ARTICLES = ("the ", "a ", "an ")


def strip_article(expression: str) -> str:
    """``r'``: the expression without a leading article, whitespace-normalised.

    Raises:
        ValueError: If the expression is empty or whitespace only.
    """
    if not isinstance(expression, str):
        raise TypeError(f"expression must be a str, got {type(expression).__name__}")
    text = " ".join(expression.split())
    if not text:
        raise ValueError(f"expression is empty or whitespace only: {expression!r}")
    low = text.lower()
    for art in ARTICLES:
        if low.startswith(art) and len(text) > len(art):
            return text[len(art) :]
    return text


def hf_tokenize(tokenizer: Any, texts: Sequence[str]) -> TokenBatch:
    """Tokenize with a Hugging Face *fast* tokenizer, keeping character offsets.

    Raises:
        TypeError: If the tokenizer cannot return offsets (a slow tokenizer).
    """
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError("the tokenizer must be a fast (Rust) tokenizer to return char offsets")
    max_length = int(tokenizer.model_max_length)
    enc = tokenizer(
        list(texts),
        padding="max_length",
        max_length=max_length,
        truncation=True,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        return_tensors="pt",
    )
    full = tokenizer(list(texts), truncation=False, add_special_tokens=True)["input_ids"]
    truncated = torch.tensor([len(ids) > max_length for ids in full], dtype=torch.bool)
    return TokenBatch(
        ids=enc["input_ids"],
        offsets=enc["offset_mapping"],
        attention_mask=enc["attention_mask"].bool(),
        special=enc["special_tokens_mask"].bool(),
        truncated=truncated,
    )


def _tokenize_one(tokenizer: Any, instruction: str) -> TokenBatch:
    if hasattr(tokenizer, "forward_capture"):  # an EditingBackbone
        return tokenizer.tokenize([instruction])
    if isinstance(tokenizer, TokenBatch):
        return tokenizer
    if callable(tokenizer) and not hasattr(tokenizer, "is_fast"):
        return tokenizer([instruction])
    return hf_tokenize(tokenizer, [instruction])


def expression_token_span(
    tokenizer: Any, instruction: str, ref: str, start: int | None = None
) -> list[int]:
    """Token positions of ``ref`` inside ``instruction``, minus specials and stop words.

    A token belongs to the span when its character range overlaps the range of ``ref``
    (so every BPE sub-word of a word is included); tokens of stop words are dropped.

    Args:
        tokenizer: An :class:`~edit_ris.backbones.EditingBackbone`, a callable returning a
            :class:`TokenBatch`, or a Hugging Face fast tokenizer.
        instruction: The full instruction.
        ref: The expression as it appears in the instruction.
        start: Character position of ``ref`` in ``instruction`` (default: first occurrence).

    Returns:
        Sorted token positions (non-empty).

    Raises:
        ValueError: If ``ref`` is not in ``instruction``, was truncated away by the tokenizer's
            max length, or all its tokens are filtered (stop words only).
    """
    if start is None:
        start = instruction.find(ref)
    if start < 0 or instruction[start : start + len(ref)] != ref:
        raise ValueError(f"ref {ref!r} does not occur in instruction {instruction!r}")
    end = start + len(ref)
    tb = _tokenize_one(tokenizer, instruction)
    offsets, special = tb.offsets[0], tb.special[0]
    valid = (~special) & (offsets[:, 1] > offsets[:, 0])
    last_end = int(offsets[valid, 1].max()) if bool(valid.any()) else 0
    if last_end < end:
        raise ValueError(
            f"expression {ref!r} is truncated by the tokenizer's max length "
            f"(tokens cover characters up to {last_end}, the expression ends at {end})"
        )
    # word boundaries inside ref, to test each token's word against the stop list
    words, pos = [], start
    for w in ref.split():
        s = instruction.index(w, pos)
        words.append((s, s + len(w), w.lower().strip(".,;:!?'\"")))
        pos = s + len(w)
    span = []
    for k in torch.nonzero(valid).flatten().tolist():
        s, e = int(offsets[k, 0]), int(offsets[k, 1])
        if e <= start or s >= end:
            continue
        word = next((w for ws, we, w in words if s < we and e > ws), "")
        if word in STOP_WORDS:
            continue
        span.append(k)
    if not span:
        raise ValueError(f"every token of expression {ref!r} is filtered (stop words only)")
    return span
