"""Plain data types shared by every part of the package: a sampled path and a run result."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["Path", "Prompt", "RunResult"]

#: A completion prompt, or chat messages (``[{"role": ..., "content": ...}, ...]``) for
#: back-ends with a chat template (:class:`~preg.generators.hf.HFGenerator`).
Prompt = str | Sequence[Mapping[str, Any]]


def _as_f64(x: Any, name: str) -> NDArray[np.float64] | None:
    if x is None:
        return None
    arr = np.asarray(x, dtype=np.float64)
    return arr


@dataclass
class Path:
    """One sampled continuation of a prompt with its per-token log-probabilities.

    Attributes:
        token_ids: generated token ids (may be empty for text-only back-ends).
        text: generated text (prompt excluded).
        token_logprobs: ``(T,)`` log-probability of each sampled token under the model
            (temperature 1, before any top-p truncation).
        token_entropies: ``(T,)`` entropy of the next-token distribution, or ``None``.
        topk_logprobs: ``(T, k)`` the k largest log-probabilities at each step (descending), or
            ``None``.
        finished: the path ended with an end-of-sequence token / stop string.
        answer: the extracted answer (filled by the methods), ``None`` when none was found.
        token_texts: per-token text pieces (lets a prefix keep its text), or ``None``.
        meta: free-form metadata (back-ends store bookkeeping here).
    """

    token_ids: list[int]
    text: str
    token_logprobs: NDArray[np.float64]
    token_entropies: NDArray[np.float64] | None = None
    topk_logprobs: NDArray[np.float64] | None = None
    finished: bool = False
    answer: Hashable | None = None
    token_texts: list[str] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.token_logprobs = np.asarray(self.token_logprobs, dtype=np.float64).reshape(-1)
        self.token_entropies = _as_f64(self.token_entropies, "token_entropies")
        self.topk_logprobs = _as_f64(self.topk_logprobs, "topk_logprobs")
        n = self.token_logprobs.shape[0]
        if self.token_ids and len(self.token_ids) != n:
            raise ValueError(
                f"token_ids has {len(self.token_ids)} entries but token_logprobs has {n}"
            )
        if self.token_entropies is not None and self.token_entropies.shape != (n,):
            raise ValueError(
                f"token_entropies must have shape ({n},), got {self.token_entropies.shape}"
            )
        if self.topk_logprobs is not None and (
            self.topk_logprobs.ndim != 2 or self.topk_logprobs.shape[0] != n
        ):
            raise ValueError(
                f"topk_logprobs must have shape ({n}, k), got {self.topk_logprobs.shape}"
            )

    @property
    def n_tokens(self) -> int:
        """Number of generated tokens."""
        return int(self.token_logprobs.shape[0])

    def truncate(self, n: int) -> Path:
        """The first ``n`` tokens of this path (itself when it is not longer than ``n``).

        A truncated path is unfinished; its text is rebuilt from ``token_texts`` when known.
        """
        if n >= self.n_tokens:
            return self
        texts = self.token_texts[:n] if self.token_texts is not None else None
        return replace(
            self,
            token_ids=list(self.token_ids[:n]),
            text="".join(texts) if texts is not None else "",
            token_logprobs=self.token_logprobs[:n],
            token_entropies=None if self.token_entropies is None else self.token_entropies[:n],
            topk_logprobs=None if self.topk_logprobs is None else self.topk_logprobs[:n],
            finished=False,
            answer=None,
            token_texts=texts,
            meta=dict(self.meta),
        )

    @staticmethod
    def concat(prefix: Path, rest: Path) -> Path:
        """Join a prefix and its continuation into one path."""

        def cat(a: NDArray[np.float64] | None, b: NDArray[np.float64] | None) -> Any:
            if a is None or b is None:
                return None
            if a.ndim == 2 and b.ndim == 2 and a.shape[1] != b.shape[1]:
                k = min(a.shape[1], b.shape[1])
                a, b = a[:, :k], b[:, :k]
            return np.concatenate([a, b], axis=0)

        texts = (
            prefix.token_texts + rest.token_texts
            if prefix.token_texts is not None and rest.token_texts is not None
            else None
        )
        return Path(
            token_ids=list(prefix.token_ids) + list(rest.token_ids),
            text=prefix.text + rest.text,
            token_logprobs=np.concatenate([prefix.token_logprobs, rest.token_logprobs]),
            token_entropies=cat(prefix.token_entropies, rest.token_entropies),
            topk_logprobs=cat(prefix.topk_logprobs, rest.topk_logprobs),
            finished=rest.finished,
            token_texts=texts,
            meta={**prefix.meta, **rest.meta},
        )


@dataclass
class RunResult:
    """Outcome of one method on one prompt.

    Attributes:
        answer: the aggregated answer (``None`` when no path produced one).
        totals: vote weight per answer.
        paths: the paths that took part in the vote (full paths for PreG's kept set).
        prefix_tokens: tokens generated in the prefix stage(s) (0 for full-sample methods).
        completion_tokens: tokens generated after the prefix stage (all tokens for full-sample
            methods).
        total_tokens: ``prefix_tokens + completion_tokens``: every generated token.
        scores: the score of each voting path (empty for plain majority).
    """

    answer: Hashable | None
    totals: dict[Hashable, float]
    paths: Sequence[Path]
    prefix_tokens: int
    completion_tokens: int
    total_tokens: int
    scores: list[float] = field(default_factory=list)
