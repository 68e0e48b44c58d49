"""EVA-Cap: event-centric SFT, then GRPO against the three event rewards."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eva_cap._validation import check_texts, check_weights
from eva_cap.decompose import Decomposer, GrammarDecomposer
from eva_cap.grpo import GRPOConfig, GRPOTrainer
from eva_cap.policy import index_batch
from eva_cap.rewards import REWARD_NAMES, trl_reward_funcs
from eva_cap.sft import quality_control, sft_train
from methodkit import progress as progress_bar
from methodkit.checks import check_int, check_real

__all__ = ["EVACapResult", "eva_cap_train", "grpo_train"]


@dataclass
class EVACapResult:
    """What :func:`eva_cap_train` returns (the policy itself is trained in place)."""

    kept: np.ndarray  # quality-control mask over the training captions
    sft_losses: list[float]
    grpo_logs: list[dict[str, float]] = field(default_factory=list)
    reference: Any = None  # the frozen SFT policy (GRPO's KL reference)


def grpo_train(
    trainer: GRPOTrainer,
    data: Mapping[str, Any],
    steps: int,
    clips_per_step: int = 8,
    random_state: int = 0,
    callback: Callable[[int, dict[str, float]], None] | None = None,
    progress: bool | None = None,
) -> list[dict[str, float]]:
    """Run ``steps`` GRPO steps; returns the logs of every step.

    Each step takes ``clips_per_step`` clips drawn without replacement (reshuffled every
    epoch).

    Args:
        trainer: The :class:`~eva_cap.GRPOTrainer`.
        data: Model inputs (first dimension N) and a ``gold_events`` column.
        steps: GRPO steps (>= 0).
        clips_per_step: Clips per step, in [1, N].
        random_state: Seed of the clip order.
        callback: Called as ``callback(step, log)`` after every step.
        progress: Progress bar over the steps: ``None`` on a terminal only, ``True`` always,
            ``False`` never (``TQDM_DISABLE=1`` silences it).

    Raises:
        ValueError: If ``data`` has no ``gold_events`` column, ``steps < 0`` or
            ``clips_per_step`` is outside [1, N].
        TypeError: If a count is not an int or ``callback`` is not callable.
    """
    if "gold_events" not in data:
        raise ValueError(f"data needs a 'gold_events' column, got columns {sorted(data)}")
    if callback is not None and not callable(callback):
        raise TypeError(f"callback must be callable, got {type(callback).__name__}")
    n = len(data["gold_events"])
    steps = check_int("steps", steps, low=0)
    clips_per_step = check_int("clips_per_step", clips_per_step, low=0)
    if steps < 0 or not 1 <= clips_per_step <= n:
        raise ValueError(f"need steps >= 0 and 1 <= clips_per_step <= {n}, got {steps}, "
                         f"{clips_per_step}")  # fmt: skip
    rng = np.random.default_rng(random_state)
    order, pos, logs = rng.permutation(n), 0, []
    for i in progress_bar(range(steps), progress, desc="EVA-Cap GRPO", total=steps):
        if pos + clips_per_step > n:
            order, pos = rng.permutation(n), 0
        log = trainer.step(index_batch(data, order[pos : pos + clips_per_step]))
        pos += clips_per_step
        logs.append(log)
        if callback is not None:
            callback(i, log)
    return logs


def eva_cap_train(
    policy: Any,
    data: Mapping[str, Any],
    captions: Sequence[str],
    *,
    decomposer: Decomposer | None = None,
    sft_steps: int = 6600,
    sft_lr: float = 2e-3,
    sft_batch: int = 64,
    qc_min_f1: float = 0.8,
    grpo_steps: int = 2100,
    clips_per_step: int = 8,
    grpo_config: GRPOConfig | None = None,
    weights: Sequence[float] = (1.0, 1.0, 1.0),
    random_state: int = 0,
    progress: bool | None = None,
) -> EVACapResult:
    r"""Train a captioner with EVA-Cap: event quality control, SFT, then event-reward GRPO.

    1. Decompose every training caption, keep it iff it parses and its event F1 against the
       clip's reference events is ``>= qc_min_f1`` (EVA-Data's event-centric QC).
    2. SFT: teacher-forced cross-entropy on the kept (clip, caption) pairs.
    3. Freeze a copy of the SFT policy as the KL reference.
    4. GRPO (group size G, clipped ratio, k3 KL to the reference) on the gated reward
       :math:`R = R_{fmt}(w_c R_{comp} + w_a R_{attr} + w_s R_{sync})`.

    Args:
        policy: A :class:`~eva_cap.CaptionPolicy` module (trained in place).
        data: Model inputs (tensors, first dimension N) and a ``gold_events`` column.
        captions: N training captions (e.g. web captions).
        decomposer: Caption -> events (default: the synthetic grammar's).
        sft_steps: SFT gradient steps.
        sft_lr: SFT AdamW learning rate.
        sft_batch: SFT batch size.
        qc_min_f1: Quality-control threshold.
        grpo_steps: GRPO steps.
        clips_per_step: Clips per GRPO step (each with G samples).
        grpo_config: GRPO hyper-parameters (default :class:`GRPOConfig`).
        weights: ``(w_c, w_a, w_s)``.
        random_state: Seed of the minibatch orders (sampling seed: ``grpo_config.seed``).
        progress: Progress bars of the SFT and GRPO loops: ``None`` on a terminal only,
            ``True`` always, ``False`` never (``TQDM_DISABLE=1`` silences them).

    Returns:
        The QC mask, SFT losses, GRPO logs and the frozen reference.

    Raises:
        ValueError: If no caption passes quality control, ``captions`` and ``data`` differ
            in length, ``data`` has no ``gold_events``, or a step count, learning rate,
            threshold or weight is out of range (NaN and infinity included); all checked
            before any training starts.
        TypeError: If ``captions`` is a single str or holds a non-str, or a count is not an
            int.

    References:
        EVA-Cap (NeurIPS 2026, abstract only; formulas inferred); Shao et al. 2024 (GRPO).

    Example:
        >>> from eva_cap.synthetic import AVWorld, TinyAVCaptioner, collate
        >>> clips = AVWorld(0).sample(16)
        >>> model = TinyAVCaptioner(d=16, n_enc=1, n_dec=1)
        >>> res = eva_cap_train(model, collate(clips), [c.web_caption for c in clips],
        ...                     sft_steps=2, grpo_steps=1, clips_per_step=2,
        ...                     grpo_config=GRPOConfig(num_generations=2))
        >>> len(res.grpo_logs)
        1
    """
    dec = decomposer if decomposer is not None else GrammarDecomposer()
    if "gold_events" not in data:
        raise ValueError(f"data needs a 'gold_events' column, got columns {sorted(data)}")
    gold = data["gold_events"]
    captions = check_texts("captions", captions)
    if len(captions) != len(gold):
        raise ValueError(f"{len(captions)} captions but {len(gold)} clips")
    check_int("sft_steps", sft_steps, low=0)
    check_int("sft_batch", sft_batch, low=1)
    check_real("sft_lr", sft_lr, 0.0, low_open=True)
    check_real("qc_min_f1", qc_min_f1, 0.0, 1.0)
    check_int("grpo_steps", grpo_steps, low=0)
    check_int("clips_per_step", clips_per_step, low=1)
    weights = check_weights("weights", weights, len(REWARD_NAMES))
    kept = quality_control(zip(captions, gold, strict=True), dec, qc_min_f1)  # step 1
    if not kept.any():
        raise ValueError(f"no caption passed quality control at min_f1={qc_min_f1}")
    idx = np.flatnonzero(kept)
    losses = sft_train(
        policy,
        index_batch(data, idx),
        [captions[i] for i in idx],
        sft_steps,
        sft_lr,
        batch_size=sft_batch,
        random_state=random_state,
        progress=progress,
    )  # step 2; fmt: skip
    reference = copy.deepcopy(policy)  # step 3
    cfg = grpo_config if grpo_config is not None else GRPOConfig()
    trainer = GRPOTrainer(
        policy,
        reference,
        trl_reward_funcs(dec, weights=weights),  # step 4: the gated total
        cfg,
        metric_funcs=trl_reward_funcs(dec, components=True),
    )
    logs = grpo_train(trainer, data, grpo_steps, clips_per_step, random_state, progress=progress)
    return EVACapResult(kept, losses, logs, reference)
