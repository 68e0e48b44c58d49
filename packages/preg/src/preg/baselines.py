"""Baselines on the same back-end and the same token accounting.

Each baseline samples full paths (``run``) or aggregates paths the user already has
(``aggregate``): self-consistency (majority or confidence-weighted), DeepConf offline
(keep the most confident fraction by lowest-group confidence, then a confidence-weighted vote),
best-of-N by path confidence or an external scorer, and prefix-confidence best-of (Otth et al.:
continue only the single most confident prefix).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._common import (
    Extractor,
    check_generator,
    check_n,
    check_prompt,
    check_sampling,
    check_score,
    derive_seed,
    extract,
    keep_count,
    scores,
)
from .types import Path, Prompt, RunResult
from .voting import majority_vote, scores_to_weights, weighted_vote

__all__ = ["BestOfN", "DeepConfOffline", "PrefixConfidenceBestOf", "SelfConsistency"]


class _FullSampleMethod:
    """Sample ``n`` full paths, then aggregate them."""

    needs_logprobs = True

    def __init__(
        self,
        generator: Any,
        extractor: Extractor,
        n: int,
        max_new_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | None,
    ) -> None:
        check_n("n", n)
        check_n("max_new_tokens", max_new_tokens)
        if not callable(extractor):
            raise TypeError(f"extractor must be callable, got {type(extractor).__name__}")
        check_sampling(temperature, top_p, n)
        if generator is not None:
            check_generator(generator, needs_logprobs=self.needs_logprobs)
        self.generator, self.extractor = generator, extractor
        self.n, self.max_new_tokens = int(n), int(max_new_tokens)
        self.temperature, self.top_p, self.seed = float(temperature), float(top_p), seed

    def run(self, prompt: Prompt, seed: int | None = None) -> RunResult:
        """Sample ``n`` full paths for ``prompt`` and aggregate them."""
        if self.generator is None:
            raise ValueError("this instance has no generator; use .aggregate(paths)")
        check_prompt(prompt)
        seed = self.seed if seed is None else seed
        paths = self.generator.sample(
            prompt,
            self.n,
            self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            seed=derive_seed(seed, 0),
        )
        return self.aggregate(paths)

    def aggregate(self, paths: Sequence[Path]) -> RunResult:
        """Aggregate existing full paths (all their tokens count as generated)."""
        raise NotImplementedError

    @staticmethod
    def _result(
        paths: Sequence[Path], answer: Any, totals: dict[Any, float], s: Sequence[float] = ()
    ) -> RunResult:
        n_tok = sum(p.n_tokens for p in paths)
        return RunResult(answer, totals, list(paths), 0, n_tok, n_tok, list(s))


class SelfConsistency(_FullSampleMethod):
    """Self-consistency (Wang et al. 2023): majority vote over ``n`` full samples.

    With ``weighted=True`` the vote is confidence-weighted,
    ``w_i = exp(beta (S_i - max S))`` with ``S`` the full-path ``score`` aggregated by
    ``score_agg``.

    Args:
        generator: back-end (``None`` to use only :meth:`aggregate`).
        extractor: answer extractor.
        n: number of samples ``M``.
        max_new_tokens: budget per sample.
        weighted: confidence-weighted vote instead of the plain majority.
        score: token confidence kind for the weights.
        score_agg: aggregation for the weights.
        window: window of the windowed aggregations.
        beta: inverse temperature of the weights.
        temperature: sampling temperature.
        top_p: nucleus threshold.
        seed: base seed.
    """

    def __init__(
        self,
        generator: Any,
        extractor: Extractor,
        n: int = 16,
        max_new_tokens: int = 1024,
        weighted: bool = False,
        score: str = "logprob",
        score_agg: str = "mean",
        window: int = 64,
        beta: float = 1.0,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> None:
        self.needs_logprobs = weighted
        check_score(score, score_agg, window)
        super().__init__(generator, extractor, n, max_new_tokens, temperature, top_p, seed)
        self.weighted, self.score, self.score_agg = weighted, score, score_agg
        self.window, self.beta = int(window), float(beta)

    def aggregate(self, paths: Sequence[Path]) -> RunResult:
        """Majority (or weighted) vote over ``paths``."""
        answers = extract(paths, self.extractor)
        if not self.weighted:
            return self._result(paths, *majority_vote(answers))
        s = scores(paths, self.score, self.score_agg, self.window)
        return self._result(paths, *weighted_vote(answers, scores_to_weights(s, self.beta)), s)


class DeepConfOffline(_FullSampleMethod):
    """DeepConf offline (Fu et al., arXiv:2508.15260), re-implemented from the paper.

    Token confidence ``c_t = -(1/k) sum_j log p_t^(j)`` (``topk_mean``), path confidence =
    lowest group mean over windows of ``window`` tokens; keep the top ``keep_frac`` of the paths
    (0.1 = DeepConf-low, 0.9 = DeepConf-high) and vote with the confidences as weights.

    Args:
        generator: back-end (``None`` to use only :meth:`aggregate`).
        extractor: answer extractor.
        n: number of full samples.
        max_new_tokens: budget per sample.
        keep_frac: fraction kept.
        score: token confidence kind (``topk_mean`` as in the paper).
        score_agg: path aggregation (``lowest_group`` as in the paper).
        window: group size (2048 in the paper).
        k: top-k of ``topk_mean``.
        weight_mode: ``"identity"`` (the paper; needs non-negative scores) or ``"exp"``.
        beta: inverse temperature when ``weight_mode="exp"``.
        temperature: sampling temperature.
        top_p: nucleus threshold.
        seed: base seed.
    """

    def __init__(
        self,
        generator: Any,
        extractor: Extractor,
        n: int = 16,
        max_new_tokens: int = 1024,
        keep_frac: float = 0.1,
        score: str = "topk_mean",
        score_agg: str = "lowest_group",
        window: int = 2048,
        k: int = 20,
        weight_mode: str = "identity",
        beta: float = 1.0,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> None:
        check_score(score, score_agg, window)
        if weight_mode not in ("identity", "exp"):
            raise ValueError(f"weight_mode must be 'identity' or 'exp', got {weight_mode!r}")
        super().__init__(generator, extractor, n, max_new_tokens, temperature, top_p, seed)
        self.keep = keep_count(self.n, None, keep_frac)
        self.keep_frac = keep_frac
        self.score, self.score_agg, self.window, self.k = score, score_agg, int(window), int(k)
        self.weight_mode, self.beta = weight_mode, float(beta)

    def aggregate(self, paths: Sequence[Path]) -> RunResult:
        """Filter the least confident paths, then confidence-weighted vote."""
        keep = keep_count(len(paths), None, self.keep_frac)
        s = np.asarray(scores(paths, self.score, self.score_agg, self.window, k=self.k))
        idx = np.argsort(-s, kind="stable")[:keep]
        kept = [paths[i] for i in idx]
        answers = extract(kept, self.extractor)
        w = scores_to_weights(s[idx], self.beta, self.weight_mode)
        answer, totals = weighted_vote(answers, np.maximum(w, 0.0))
        r = self._result(paths, answer, totals, [float(x) for x in s[idx]])
        r.paths = kept
        return r


class BestOfN(_FullSampleMethod):
    """Best-of-N: the answer of the single highest-scoring full path.

    Args:
        generator: back-end (``None`` to use only :meth:`aggregate`).
        extractor: answer extractor.
        n: number of full samples.
        max_new_tokens: budget per sample.
        score: token confidence kind, used when ``scorer`` is None.
        score_agg: its aggregation.
        window: its window.
        scorer: optional external scorer ``f(path) -> float`` (e.g. a reward model).
        temperature: sampling temperature.
        top_p: nucleus threshold.
        seed: base seed.
    """

    def __init__(
        self,
        generator: Any,
        extractor: Extractor,
        n: int = 16,
        max_new_tokens: int = 1024,
        score: str = "logprob",
        score_agg: str = "mean",
        window: int = 64,
        scorer: Callable[[Path], float] | None = None,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> None:
        self.needs_logprobs = scorer is None
        check_score(score, score_agg, window)
        super().__init__(generator, extractor, n, max_new_tokens, temperature, top_p, seed)
        self.score, self.score_agg, self.window, self.scorer = score, score_agg, int(window), scorer

    def aggregate(self, paths: Sequence[Path]) -> RunResult:
        """Pick the path with the best score among those with an answer."""
        answers = extract(paths, self.extractor)
        if self.scorer is not None:
            s = [float(self.scorer(p)) for p in paths]
        else:
            s = scores(paths, self.score, self.score_agg, self.window)
        cand = [i for i, a in enumerate(answers) if a is not None]
        if not cand:
            return self._result(paths, None, {}, s)
        best = max(cand, key=lambda i: (s[i], -i))
        return self._result(paths, answers[best], {answers[best]: 1.0}, s)


class PrefixConfidenceBestOf:
    """Prefix-confidence best-of (Otth et al., arXiv:2507.18122): complete only the best prefix.

    Samples ``n_prefixes`` prefixes of ``prefix_len`` tokens, completes the one with the highest
    mean ``score`` and returns its answer.

    Args:
        generator: back-end.
        extractor: answer extractor.
        n_prefixes: number of prefixes.
        prefix_len: prefix length (tokens).
        max_new_tokens: budget per path.
        score: token confidence kind.
        score_agg: aggregation.
        window: window of the windowed aggregations.
        temperature: sampling temperature.
        top_p: nucleus threshold.
        seed: base seed.
    """

    def __init__(
        self,
        generator: Any,
        extractor: Extractor,
        n_prefixes: int = 32,
        prefix_len: int = 32,
        max_new_tokens: int = 1024,
        score: str = "logprob",
        score_agg: str = "mean",
        window: int = 64,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> None:
        check_n("n_prefixes", n_prefixes)
        check_n("prefix_len", prefix_len)
        check_n("max_new_tokens", max_new_tokens)
        check_score(score, score_agg, window)
        check_sampling(temperature, top_p, n_prefixes)
        check_generator(generator, needs_logprobs=True)
        self.generator, self.extractor = generator, extractor
        self.n_prefixes, self.prefix_len = int(n_prefixes), int(prefix_len)
        self.max_new_tokens = int(max_new_tokens)
        self.score, self.score_agg, self.window = score, score_agg, int(window)
        self.temperature, self.top_p, self.seed = float(temperature), float(top_p), seed

    def run(self, prompt: Prompt, seed: int | None = None) -> RunResult:
        """Sample prefixes, complete the most confident one, return its answer."""
        check_prompt(prompt)
        seed = self.seed if seed is None else seed
        kw = {"temperature": self.temperature, "top_p": self.top_p}
        ell = min(self.prefix_len, self.max_new_tokens)
        prefixes = self.generator.sample(
            prompt, self.n_prefixes, ell, seed=derive_seed(seed, 0), **kw
        )
        n_prefix = sum(p.n_tokens for p in prefixes)
        s = scores(prefixes, self.score, self.score_agg, self.window)
        best = int(np.argmax(s))  # first maximum on ties
        path = prefixes[best]
        extra = 0
        if not path.finished and path.n_tokens < self.max_new_tokens:
            grown = self.generator.continue_(
                prompt, [path], self.max_new_tokens, seed=derive_seed(seed, 2), **kw
            )[0]
            extra = grown.n_tokens - path.n_tokens
            path = grown
        answer = extract([path], self.extractor)[0]
        totals = {} if answer is None else {answer: 1.0}
        return RunResult(answer, totals, [path], n_prefix, extra, n_prefix + extra, [s[best]])
