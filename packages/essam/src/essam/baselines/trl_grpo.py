"""Optional adapter around ``trl.GRPOTrainer`` (extra ``essam[baselines]``; imported lazily)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["run"]


def run(
    model: Any,
    reward_funcs: Callable[..., Sequence[float]] | Sequence[Callable[..., Sequence[float]]],
    train_dataset: Any,
    *,
    processing_class: Any = None,
    **config: Any,
) -> Any:
    """Train ``model`` with ``trl.GRPOTrainer`` and return the trainer.

    Args:
        model: A ``transformers`` causal LM (or a hub id, as TRL accepts).
        reward_funcs: TRL reward function(s) (same signature as for :class:`essam.ESSAMTrainer`).
        train_dataset: A ``datasets.Dataset`` with a ``"prompt"`` column.
        processing_class: The tokenizer.
        **config: Keyword arguments of ``trl.GRPOConfig``.

    Raises:
        ImportError: If ``trl`` is not installed (``pip install trl`` or ``essam[baselines]``).
    """
    try:
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as exc:
        raise ImportError(
            "essam.baselines.trl_grpo needs TRL: pip install trl (it is not in the workspace "
            "lock; see the essam README)"
        ) from exc
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=GRPOConfig(**config),
        train_dataset=train_dataset,
        processing_class=processing_class,
    )
    trainer.train()
    return trainer
