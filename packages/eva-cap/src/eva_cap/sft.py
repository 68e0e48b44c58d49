"""Supervised fine-tuning on event-quality-controlled captions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from eva_cap._validation import check_texts
from eva_cap.decompose import Decomposer
from eva_cap.events import EventSet
from eva_cap.matching import match_events
from eva_cap.policy import index_batch
from eva_cap.rewards import completeness_reward
from methodkit import progress as progress_bar
from methodkit.checks import check_int, check_real

__all__ = ["quality_control", "sft_train"]


def quality_control(
    pairs: Iterable[tuple[str, Any]], decomposer: Decomposer, min_f1: float = 0.8
) -> np.ndarray:
    """Event-centric quality control of (caption, gold events) pairs.

    A pair is kept only if the caption parses and its events reach ``F1 >= min_f1`` against
    the clip's reference events.

    Returns:
        A boolean mask over ``pairs``.

    Raises:
        ValueError: If ``min_f1`` is not in [0, 1] (NaN included).
        TypeError: If a caption is not a str or ``decomposer`` is not callable.
    """
    if not callable(decomposer):
        raise TypeError(f"decomposer must be callable, got {type(decomposer).__name__}")
    if not 0 <= min_f1 <= 1:
        raise ValueError(f"min_f1 must be in [0, 1], got {min_f1}")
    keep = []
    for i, (caption, gold) in enumerate(pairs):
        if not isinstance(caption, str):
            raise TypeError(f"caption {i} must be a str, got {type(caption).__name__}")
        p = decomposer(caption)
        gs = EventSet.coerce(gold)
        keep.append(p.ok and completeness_reward(match_events(p.events, gs.events)) >= min_f1)
    return np.array(keep, dtype=bool)


def sft_train(
    policy: Any,
    inputs: Mapping[str, Any],
    captions: Sequence[str],
    steps: int,
    lr: float = 2e-3,
    *,
    batch_size: int = 64,
    max_len: int | None = None,
    random_state: int = 0,
    optimizer: torch.optim.Optimizer | None = None,
    weight_decay: float = 0.01,
    progress: bool | None = None,
) -> list[float]:
    """Teacher-forced cross-entropy (mean over caption tokens) with AdamW.

    Args:
        policy: A :class:`~eva_cap.CaptionPolicy` with ``encode_captions`` and parameters.
        inputs: The clips' model inputs (tensors with first dimension N; lists allowed).
        captions: N target captions; longer than ``max_len`` are truncated with a warning.
        steps: Gradient steps.
        lr: AdamW learning rate.
        batch_size: Clips per step (sampled with replacement across epochs).
        max_len: Token limit (default: the policy's).
        random_state: Seed of the minibatch order.
        optimizer: Default AdamW(lr, weight_decay).
        weight_decay: AdamW weight decay.
        progress: Progress bar over the steps: ``None`` on a terminal only, ``True`` always,
            ``False`` never (``TQDM_DISABLE=1`` silences it).

    Returns:
        The loss of every step.

    Raises:
        ValueError: On an empty dataset, mismatched lengths, ``steps < 0``, ``batch_size < 1``,
            or an ``lr`` / ``weight_decay`` that is NaN, infinite or out of range.
        TypeError: If ``captions`` is a single str or holds a non-str, or a count is not an
            int.
    """
    captions = check_texts("captions", captions)
    n = len(captions)
    if n == 0:
        raise ValueError("sft_train needs at least one caption")
    lens = {k: len(v) for k, v in inputs.items() if isinstance(v, torch.Tensor | list | tuple)}
    if any(v != n for v in lens.values()):
        raise ValueError(f"{n} captions but inputs have lengths {lens}")
    steps = check_int("steps", steps, low=0)
    batch_size = check_int("batch_size", batch_size, low=1)
    lr = check_real("lr", lr, 0.0, low_open=True)
    weight_decay = check_real("weight_decay", weight_decay, 0.0)
    tokens, mask = policy.encode_captions(list(captions), max_len)
    opt = optimizer or torch.optim.AdamW(policy.parameters(), lr=lr, weight_decay=weight_decay)
    rng = np.random.default_rng(random_state)
    order = rng.permutation(n)
    pos, losses = 0, []
    policy.train()
    for _ in progress_bar(range(steps), progress, desc="EVA-Cap SFT", total=steps):
        if pos + min(batch_size, n) > n:
            order, pos = rng.permutation(n), 0
        idx = order[pos : pos + min(batch_size, n)]
        pos += len(idx)
        t, m = tokens[idx], mask[idx].float()
        L = int(m.sum(1).max())
        logp = policy.token_logprobs(index_batch(inputs, idx), t[:, :L])
        loss = -(logp * m[:, :L]).sum() / m[:, :L].sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    policy.eval()
    return losses
