"""What EVA-Cap is compared with: an unstructured text-overlap reward and reward ablations.

* ``GRPO-text``: GRPO on :func:`text_overlap_reward` (ROUGE-L F1 of the caption against the
  reference caption, computed here): captioning as plain text generation.
* ``GRPO-comp`` / ``GRPO-attr`` / ``GRPO-sync``: one event reward alone
  (:data:`ABLATION_WEIGHTS`), still gated by the format term.
* ``SFT-raw`` is :func:`~eva_cap.sft_train` on every web caption (no quality control) and
  ``GRPO-noKL`` is :class:`~eva_cap.GRPOConfig` with ``beta=0``: no code of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eva_cap.synthetic.grammar import caption_words

__all__ = ["ABLATION_WEIGHTS", "TextOverlapReward", "rouge_l_f1", "text_overlap_reward"]

#: Event-reward weights ``(w_c, w_a, w_s)`` of the single-reward ablations.
ABLATION_WEIGHTS = {
    "GRPO-comp": (1.0, 0.0, 0.0),
    "GRPO-attr": (0.0, 1.0, 0.0),
    "GRPO-sync": (0.0, 0.0, 1.0),
}


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l_f1(candidate: str, reference: str) -> float:
    """ROUGE-L F1 over words: ``2 P R / (P + R)`` with ``P = LCS/|c|``, ``R = LCS/|r|``."""
    c, r = caption_words(candidate), caption_words(reference)
    if not c or not r:
        return 0.0
    lcs = _lcs(c, r)
    if lcs == 0:
        return 0.0
    p, rec = lcs / len(c), lcs / len(r)
    return 2 * p * rec / (p + rec)


def text_overlap_reward(completions: Sequence[str], references: Sequence[str]) -> list[float]:
    """ROUGE-L F1 of each completion against its reference caption."""
    if len(completions) != len(references):
        raise ValueError(f"{len(completions)} completions but {len(references)} references")
    return [rouge_l_f1(c, r) for c, r in zip(completions, references, strict=True)]


class TextOverlapReward:
    """TRL-style callable ``f(prompts, completions, reference, **kw)`` for ``GRPO-text``."""

    __name__ = "text_overlap"

    def __call__(
        self,
        prompts: Any = None,
        completions: Sequence[str] = (),
        reference: Sequence[str] | None = None,
        **kw: Any,
    ) -> list[float]:
        """ROUGE-L F1 of each completion against its ``reference`` row."""
        if reference is None:
            raise ValueError("TextOverlapReward needs a 'reference' column")
        return text_overlap_reward(list(completions), list(reference))
