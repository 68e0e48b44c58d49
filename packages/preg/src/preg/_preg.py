"""Prefix-Guided Sampling (PreG): the method's core, one function per step of the algorithm."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from methodkit import progress as show_progress

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
from .budget import TokenLedger
from .types import Path, Prompt, RunResult
from .voting import scores_to_weights, weighted_vote

__all__ = ["PrefixGuidedSampler"]

WEIGHTS = ("full", "prefix", "uniform")


class PrefixGuidedSampler:
    r"""Prefix-Guided Sampling: sample short prefixes, keep the most confident, finish those.

    For a prompt ``x`` with ``N`` prefixes of ``L`` tokens, keeping ``K``:

    1. sample ``N`` prefixes :math:`y^{(i)}_{1:L}` (a path that finishes within ``L`` is complete);
    2. score each prefix :math:`s_i = S(y^{(i)}_{1:L})` (token confidence ``score`` aggregated by
       ``score_agg``) and keep the ``K`` highest (stable order: ties keep the earlier prefix);
    3. continue each kept, unfinished prefix to ``max_new_tokens`` tokens in total (conditioned
       on ``x`` + prefix, hence distributed like the rest of a full sample);
    4. vote: :math:`\hat a = \arg\max_a \sum_{i\in kept} w_i [a_i = a]` with
       :math:`w_i = \exp(\beta (S_i - \max_j S_j))` on the full-path score (``weight="full"``),
       the prefix score (``"prefix"``) or :math:`w_i = 1` (``"uniform"``).

    A ``schedule=[(L1, K1), (L2, K2), ...]`` prunes at several lengths (``L`` increasing, ``K``
    non-increasing). Generated tokens: :math:`B = \sum_i \min(L, len_i) + \sum_{kept}(len_i - L)^+`.

    Args:
        generator: a back-end implementing :class:`preg.generators.Generator`.
        extractor: callable ``text -> answer | None``.
        n_prefixes: ``N``.
        prefix_len: ``L`` (tokens).
        keep: ``K``; or give ``keep_frac`` (``K = ceil(keep_frac N)``).
        keep_frac: fraction of prefixes kept.
        max_new_tokens: generation budget per path (prefix included).
        score: token confidence, ``"logprob"``, ``"neg_entropy"`` or ``"topk_mean"``.
        score_agg: ``"mean"``, ``"lowest_group"``, ``"bottom_frac"`` or ``"tail"``.
        window: group size of the windowed aggregations.
        weight: ``"full"``, ``"prefix"`` or ``"uniform"``.
        beta: inverse temperature of the vote weights.
        schedule: optional multi-stage ``[(L, K), ...]`` replacing ``prefix_len``/``keep``.
        temperature: sampling temperature.
        top_p: nucleus threshold.
        seed: base seed (``run(prompt, seed=...)`` overrides it).
        allow_full_prefix: allow ``prefix_len >= max_new_tokens`` (then PreG = scored SC).

    References:
        Prefix-Guided Sampling (abstract only; algorithm inferred), with prefix-confidence
        scaling (Otth et al., arXiv:2507.18122) and DeepConf (Fu et al., arXiv:2508.15260).

    Example:
        >>> from preg import PrefixGuidedSampler, RegexExtractor
        >>> from preg.generators.sim import PathSimulator
        >>> sim = PathSimulator(seed=0)
        >>> q = sim.questions[0]
        >>> s = PrefixGuidedSampler(sim.generator(), RegexExtractor(r"A(\d+)"), n_prefixes=16,
        ...                         prefix_len=8, keep=4, max_new_tokens=32, seed=0)
        >>> res = s.run(q.prompt)
        >>> res.total_tokens <= 16 * 8 + 4 * 24
        True
    """

    def __init__(
        self,
        generator: Any,
        extractor: Extractor,
        n_prefixes: int = 32,
        prefix_len: int = 64,
        keep: int | None = None,
        keep_frac: float | None = None,
        max_new_tokens: int = 1024,
        score: str = "logprob",
        score_agg: str = "mean",
        window: int = 64,
        weight: str = "full",
        beta: float = 1.0,
        schedule: Sequence[tuple[int, int]] | None = None,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
        allow_full_prefix: bool = False,
    ) -> None:
        check_n("n_prefixes", n_prefixes)
        check_n("max_new_tokens", max_new_tokens)
        if not callable(extractor):
            raise TypeError(f"extractor must be callable, got {type(extractor).__name__}")
        check_score(score, score_agg, window)
        if weight not in WEIGHTS:
            raise ValueError(f"weight must be one of {WEIGHTS}, got {weight!r}")
        if beta < 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        check_sampling(temperature, top_p, n_prefixes)
        if schedule is None:
            if keep is None and keep_frac is None:
                keep = min(8, n_prefixes)
            k = keep_count(n_prefixes, keep, keep_frac)
            stages = [(int(prefix_len), k)]
        else:
            if keep is not None or keep_frac is not None:
                raise ValueError("give schedule or keep/keep_frac, not both")
            stages = [(int(a), int(b)) for a, b in schedule]
            if not stages:
                raise ValueError("schedule must have at least one (prefix_len, keep) stage")
            prev_l, prev_k = 0, n_prefixes
            for ell, kk in stages:
                if ell <= prev_l:
                    raise ValueError(f"schedule lengths must increase, got {schedule}")
                if not 1 <= kk <= prev_k:
                    raise ValueError(
                        f"schedule keeps must satisfy 1 <= K <= previous, got {schedule}"
                    )
                prev_l, prev_k = ell, kk
        for ell, _ in stages:
            if ell < 1:
                raise ValueError(f"prefix_len must be >= 1, got {ell}")
            if ell >= max_new_tokens and not allow_full_prefix:
                raise ValueError(
                    f"prefix_len={ell} must be < max_new_tokens={max_new_tokens} (pass "
                    "allow_full_prefix=True to score complete paths)"
                )
        check_generator(generator, needs_logprobs=True)
        self.generator = generator
        self.extractor = extractor
        self.n_prefixes = int(n_prefixes)
        self.stages = stages
        self.max_new_tokens = int(max_new_tokens)
        self.score, self.score_agg, self.window = score, score_agg, int(window)
        self.weight, self.beta = weight, float(beta)
        self.temperature, self.top_p, self.seed = float(temperature), float(top_p), seed

    @property
    def prefix_len(self) -> int:
        """Length of the (first) prefix stage."""
        return self.stages[0][0]

    @property
    def keep(self) -> int:
        """Number of paths completed (the last stage's ``K``)."""
        return self.stages[-1][1]

    def _rank(self, paths: Sequence[Path], k: int) -> tuple[list[int], list[float]]:
        s = scores(paths, self.score, self.score_agg, self.window)
        order = np.argsort(-np.asarray(s), kind="stable")[:k]
        # the kept set keeps the sampling order, so keep=N reproduces self-consistency exactly
        return sorted(int(i) for i in order), s

    def run(self, prompt: Prompt, seed: int | None = None) -> RunResult:
        """Run PreG on one prompt.

        Returns:
            :class:`~preg.RunResult` with the voted answer, the kept full paths and the exact
            generated-token counts.
        """
        check_prompt(prompt)
        seed = self.seed if seed is None else seed
        ledger = TokenLedger()
        kw = {"temperature": self.temperature, "top_p": self.top_p}
        ell0 = min(self.stages[0][0], self.max_new_tokens)
        # step 1: N prefixes
        paths = self.generator.sample(
            prompt, self.n_prefixes, ell0, seed=derive_seed(seed, 0), **kw
        )
        ledger.add_prefix(sum(p.n_tokens for p in paths))
        prefix_scores: list[float] = []
        for stage, (ell, k) in enumerate(self.stages):
            if stage > 0:  # extend the survivors to the next stage length
                paths = self._extend(
                    prompt, paths, min(ell, self.max_new_tokens), seed, stage, ledger, True
                )
            # step 2: rank by prefix confidence, keep the K best
            idx, s = self._rank(paths, k)
            paths = [paths[i] for i in idx]
            prefix_scores = [s[i] for i in idx]
        # step 3: complete the kept prefixes
        paths = self._extend(
            prompt, paths, self.max_new_tokens, seed, len(self.stages), ledger, False
        )
        # step 4: confidence-weighted vote
        answers = extract(paths, self.extractor)
        if self.weight == "uniform":
            w = np.ones(len(paths))
            used: list[float] = []
        else:
            used = (
                prefix_scores
                if self.weight == "prefix"
                else scores(paths, self.score, self.score_agg, self.window)
            )
            w = scores_to_weights(used, self.beta)
        answer, totals = weighted_vote(answers, w)
        return RunResult(
            answer=answer,
            totals=totals,
            paths=paths,
            prefix_tokens=ledger.prefix_tokens,
            completion_tokens=ledger.completion_tokens,
            total_tokens=ledger.total_tokens,
            scores=list(used),
        )

    def _extend(
        self,
        prompt: Prompt,
        paths: list[Path],
        max_tokens: int,
        seed: int | None,
        stage: int,
        ledger: TokenLedger,
        as_prefix: bool,
    ) -> list[Path]:
        todo = [i for i, p in enumerate(paths) if not p.finished and p.n_tokens < max_tokens]
        if not todo:
            return paths
        grown = self.generator.continue_(
            prompt,
            [paths[i] for i in todo],
            max_tokens,
            seed=derive_seed(seed, stage + 1),
            temperature=self.temperature,
            top_p=self.top_p,
        )
        out = list(paths)
        for i, g in zip(todo, grown, strict=True):
            extra = g.n_tokens - paths[i].n_tokens
            if extra < 0:
                raise RuntimeError("the generator's continue_ returned a shorter path")
            if as_prefix:
                ledger.add_prefix(extra)
            else:
                ledger.add_completion(extra)
            out[i] = g
        return out

    def run_many(
        self, prompts: Sequence[str], seed: int | None = None, progress: bool | None = None
    ) -> list[RunResult]:
        """Run on several prompts (seed ``seed + i`` for prompt ``i`` when a seed is set).

        ``progress``: a bar over the prompts (None: shown on a terminal only).
        """
        base = self.seed if seed is None else seed
        items = show_progress(
            list(enumerate(prompts)), enabled=progress, desc="PreG", unit="prompt"
        )
        return [self.run(p, seed=None if base is None else base + i) for i, p in items]
