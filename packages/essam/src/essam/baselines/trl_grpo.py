"""Optional adapter around ``trl.GRPOTrainer`` (extra ``essam[baselines]``; imported lazily).

:func:`wall_clock_limit` is a ``transformers`` callback that ends training at the first step
that finishes after a wall-time budget, so TRL's GRPO can be run at the same wall time as an
ES-family optimizer (whose loop checks the clock the same way, between steps).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["run", "wall_clock_limit"]

_MISSING = "essam.baselines.trl_grpo needs TRL: pip install trl (or the essam[baselines] extra)"


def wall_clock_limit(seconds: float) -> Any:
    """A ``transformers.TrainerCallback`` that stops training after ``seconds`` of wall time.

    The clock starts at ``on_train_begin``; after every optimizer step whose end lies past the
    budget, ``control.should_training_stop`` is set (the last step may overrun, as in the
    ES-family loops). The callback keeps ``elapsed`` (seconds from the start to the end of
    the last step), ``steps`` and ``curve``: ``(end of the step, mean reward)`` per logged
    step (TRL logs ``reward`` every ``logging_steps`` steps).

    Raises:
        ValueError: If ``seconds`` is not a positive finite number.
        ImportError: If ``transformers`` is not installed.
    """
    if not 0 < seconds < float("inf"):
        raise ValueError(f"seconds must be a positive finite number, got {seconds!r}")
    try:
        from transformers import TrainerCallback
    except ImportError as exc:
        raise ImportError(_MISSING) from exc

    class WallClockLimit(TrainerCallback):
        def __init__(self) -> None:
            self.seconds = float(seconds)
            self.start = 0.0
            self.elapsed = 0.0
            self.steps = 0
            self.curve: list[tuple[float, float]] = []

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.elapsed = time.perf_counter() - self.start
            self.steps = state.global_step
            if self.elapsed >= self.seconds:
                control.should_training_stop = True

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any
        ) -> None:
            if logs and "reward" in logs:
                self.curve.append((self.elapsed, float(logs["reward"])))

    return WallClockLimit()


def run(
    model: Any,
    reward_funcs: Callable[..., Sequence[float]] | Sequence[Callable[..., Sequence[float]]],
    train_dataset: Any,
    *,
    processing_class: Any = None,
    callbacks: Sequence[Any] = (),
    **config: Any,
) -> Any:
    """Train ``model`` with ``trl.GRPOTrainer`` and return the trainer.

    Only parameters with ``requires_grad`` are trained (the ``transformers`` optimizer skips
    the others), so a subset is chosen by freezing the rest beforehand. With ``beta > 0`` TRL
    builds its reference model from ``model.config._name_or_path``, which must then be a
    loadable folder (a model loaded with ``from_pretrained`` from disk has one).

    Args:
        model: A ``transformers`` causal LM (or a hub id, as TRL accepts).
        reward_funcs: TRL reward function(s) (same signature as for :class:`essam.ESSAMTrainer`;
            each needs a ``__name__``, which TRL logs).
        train_dataset: A ``datasets.Dataset`` with a ``"prompt"`` column.
        processing_class: The tokenizer.
        callbacks: ``transformers`` callbacks, e.g. :func:`wall_clock_limit`.
        **config: Keyword arguments of ``trl.GRPOConfig``.

    Raises:
        ImportError: If ``trl`` is not installed (``pip install trl`` or ``essam[baselines]``).
    """
    try:
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as exc:
        raise ImportError(_MISSING) from exc
    # TRL also accepts reward-model ids and models in this list, hence list[Any]
    funcs: list[Any] = [reward_funcs] if callable(reward_funcs) else list(reward_funcs)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=GRPOConfig(**config),
        train_dataset=train_dataset,
        processing_class=processing_class,
        callbacks=list(callbacks),
    )
    trainer.train()
    return trainer
