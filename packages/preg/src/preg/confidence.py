"""Token confidence measures and their aggregation into a path or prefix score.

Token confidence at step ``t`` from the next-token distribution ``p_t``:

* ``logprob``: ``c_t = log p_t(y_t)`` (the sampled token's log-probability);
* ``neg_entropy``: ``c_t = sum_v p_t(v) log p_t(v) = -H_t`` (top-k renormalised when only the k
  largest log-probabilities are known);
* ``topk_mean`` (DeepConf): ``c_t = -(1/k) sum_{j<=k} log p_t^(j)`` (large = peaked).

A path score ``S = agg(c_1..c_L)`` is ``mean``, ``lowest_group`` (min over windows of size ``w``
of the window mean; the mean of all when ``L < w``), ``bottom_frac`` (mean of the lowest ``q``
fraction of window means) or ``tail`` (mean of the last ``w`` tokens).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .types import Path

__all__ = ["AGGREGATIONS", "KINDS", "aggregate", "path_score", "token_confidence"]

KINDS = ("logprob", "neg_entropy", "topk_mean")
AGGREGATIONS = ("mean", "lowest_group", "bottom_frac", "tail")


def _log_softmax(logits: NDArray[np.float64]) -> NDArray[np.float64]:
    m = logits.max(axis=-1, keepdims=True)
    z = logits - m
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def _neg_entropy_from_logprobs(lp: NDArray[np.float64]) -> NDArray[np.float64]:
    lp = _log_softmax(lp)  # renormalise (a no-op for a full distribution)
    p = np.exp(lp)
    return np.where(p > 0, p * lp, 0.0).sum(axis=-1)


def token_confidence(
    path_or_arrays: Path | Any,
    kind: str = "logprob",
    k: int = 20,
    tokens: Any = None,
) -> NDArray[np.float64]:
    """Per-token confidence ``c_t`` of a path.

    Args:
        path_or_arrays: a :class:`~preg.Path`; a 1-D array of sampled-token log-probabilities
            (only for ``kind="logprob"``); or a 2-D array of logits ``(T, V)`` over the full
            vocabulary (then ``tokens`` gives the sampled ids for ``kind="logprob"``).
        kind: ``"logprob"``, ``"neg_entropy"`` or ``"topk_mean"``.
        k: number of top log-probabilities used by ``topk_mean`` (capped by what is available).
        tokens: sampled token ids ``(T,)`` when ``path_or_arrays`` are logits.

    Returns:
        float64 array of length ``T``.

    Raises:
        ValueError: unknown ``kind``, ``k < 1``, or the data needed for ``kind`` is missing.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if isinstance(path_or_arrays, Path):
        path = path_or_arrays
        if kind == "logprob":
            return path.token_logprobs
        if kind == "neg_entropy":
            if path.token_entropies is not None:
                return -path.token_entropies
            if path.topk_logprobs is None:
                raise ValueError(
                    "kind='neg_entropy' needs token_entropies or topk_logprobs on the path; ask "
                    "the back-end for top log-probs (OpenAI API: logprobs=k)"
                )
            return _neg_entropy_from_logprobs(path.topk_logprobs)
        if path.topk_logprobs is None:
            raise ValueError(
                "kind='topk_mean' needs topk_logprobs on the path; ask the back-end for top "
                "log-probs (OpenAI API: logprobs=k)"
            )
        top = np.sort(path.topk_logprobs, axis=-1)[:, ::-1][:, :k]
        return -top.mean(axis=-1)
    arr = np.asarray(path_or_arrays, dtype=np.float64)
    if arr.ndim == 1:
        if kind != "logprob":
            raise ValueError(
                f"a 1-D array holds sampled-token log-probs: only kind='logprob' works, "
                f"got kind={kind!r}; pass (T, V) logits or a Path"
            )
        return arr
    if arr.ndim != 2:
        raise ValueError(f"expected a Path, (T,) log-probs or (T, V) logits, got shape {arr.shape}")
    lp = _log_softmax(arr)
    if kind == "neg_entropy":
        return _neg_entropy_from_logprobs(lp)
    if kind == "topk_mean":
        kk = min(k, lp.shape[1])
        top = -np.sort(-lp, axis=-1)[:, :kk]
        return -top.mean(axis=-1)
    if tokens is None:
        raise ValueError("kind='logprob' with (T, V) logits needs tokens=<sampled ids>")
    ids = np.asarray(tokens, dtype=np.int64).reshape(-1)
    if ids.shape[0] != lp.shape[0]:
        raise ValueError(f"tokens has {ids.shape[0]} entries for {lp.shape[0]} logit rows")
    return lp[np.arange(lp.shape[0]), ids]


def _window_means(c: NDArray[np.float64], window: int) -> NDArray[np.float64]:
    cs = np.concatenate([[0.0], np.cumsum(c)])
    return (cs[window:] - cs[:-window]) / window


def aggregate(conf: Any, how: str = "mean", window: int = 64, frac: float = 0.1) -> float:
    """Aggregate per-token confidences into one score.

    Args:
        conf: 1-D array of token confidences.
        how: ``"mean"``, ``"lowest_group"``, ``"bottom_frac"`` or ``"tail"``.
        window: group size ``w`` for the windowed aggregations.
        frac: fraction ``q`` of the lowest window means averaged by ``bottom_frac``.

    Returns:
        The score (a Python float).

    Raises:
        ValueError: empty ``conf``, unknown ``how``, ``window < 1`` or ``frac`` outside (0, 1].
    """
    c = np.asarray(conf, dtype=np.float64).reshape(-1)
    if c.size == 0:
        raise ValueError("conf is empty: a path with no tokens has no confidence")
    if how not in AGGREGATIONS:
        raise ValueError(f"how must be one of {AGGREGATIONS}, got {how!r}")
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if not 0.0 < frac <= 1.0:
        raise ValueError(f"frac must be in (0, 1], got {frac}")
    if how == "mean" or (how != "tail" and c.size < window):
        return float(c.mean())
    if how == "tail":
        return float(c[-window:].mean())
    wm = _window_means(c, window)
    if how == "lowest_group":
        return float(wm.min())
    n = max(1, math.ceil(frac * wm.size))
    return float(np.sort(wm)[:n].mean())


def path_score(
    path: Path,
    kind: str = "logprob",
    how: str = "mean",
    window: int = 64,
    k: int = 20,
    frac: float = 0.1,
) -> float:
    """``aggregate(token_confidence(path, kind, k), how, window, frac)``."""
    return aggregate(token_confidence(path, kind, k=k), how, window=window, frac=frac)
