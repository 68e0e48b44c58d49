"""Supervised fine-tuning on event-quality-controlled captions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from eva_cap.decompose import Decomposer
from eva_cap.events import EventSet
from eva_cap.matching import match_events
from eva_cap.policy import index_batch
from eva_cap.rewards import completeness_reward

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
        ValueError: If ``min_f1`` is not in [0, 1].
    """
    if not 0 <= min_f1 <= 1:
        raise ValueError(f"min_f1 must be in [0, 1], got {min_f1}")
    keep = []
    for caption, gold in pairs:
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

    Returns:
        The loss of every step.

    Raises:
        ValueError: On an empty dataset, mismatched lengths, ``steps < 0`` or ``lr <= 0``.
    """
    n = len(captions)
    if n == 0:
        raise ValueError("sft_train needs at least one caption")
    lens = {k: len(v) for k, v in inputs.items() if isinstance(v, torch.Tensor | list | tuple)}
    if any(v != n for v in lens.values()):
        raise ValueError(f"{n} captions but inputs have lengths {lens}")
    if steps < 0 or lr <= 0:
        raise ValueError(f"steps must be >= 0 and lr > 0, got steps={steps}, lr={lr}")
    tokens, mask = policy.encode_captions(list(captions), max_len)
    opt = optimizer or torch.optim.AdamW(policy.parameters(), lr=lr, weight_decay=weight_decay)
    rng = np.random.default_rng(random_state)
    order = rng.permutation(n)
    pos, losses = 0, []
    policy.train()
    for _ in range(steps):
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
