"""``transformers`` adapter: a drop-in ``Trainer`` that trains with a zeroth-order optimizer.

Needs the ``hf`` extra (``pip install "engine-zo[hf]"``).

Example:
    >>> from transformers import GPT2Config, GPT2LMHeadModel, TrainingArguments
    >>> model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50))
    >>> args = TrainingArguments("out", learning_rate=1e-4, max_steps=2, report_to=[])
    >>> trainer = ZOTrainer(model=model, args=args, train_dataset=rows,  # doctest: +SKIP
    ...                     zo_optimizer="engine", zo_kwargs={"eps": 1e-3})
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

try:
    from transformers import Trainer
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("engine_zo.hf needs transformers: pip install 'engine-zo[hf]'") from exc

from engine_zo._base import ZOOptimizer
from engine_zo._engine import Engine
from engine_zo.baselines import LOZO, HiZOO, MeZO, SubZero, ZOAdam

OPTIMIZERS: dict[str, type[ZOOptimizer]] = {
    "engine": Engine,
    "mezo": MeZO,
    "lozo": LOZO,
    "subzero": SubZero,
    "hizoo": HiZOO,
    "zoadam": ZOAdam,
}

__all__ = ["OPTIMIZERS", "ZOTrainer"]


class ZOTrainer(Trainer):
    """``transformers.Trainer`` whose training step is one zeroth-order ``optimizer.step``.

    ``training_step`` builds a closure computing the batch loss with ``compute_loss`` (no
    backward) and calls ``optimizer.step(closure)``; the Trainer's own later
    ``optimizer.step()`` (no closure) is then a no-op. ``create_optimizer`` builds
    ``OPTIMIZERS[zo_optimizer](trainable_params, lr=args.learning_rate, **zo_kwargs)``, so the
    Trainer's learning-rate scheduler drives ``lr``. Dropout is disabled during the probes
    (``model.eval()``) so both probes see the same function.

    Args:
        *args: Passed to ``transformers.Trainer``.
        zo_optimizer: A key of :data:`OPTIMIZERS` or an optimizer class.
        zo_kwargs: Keyword arguments of the optimizer (``eps``, ``ranks``, ``seed``...).
        **kwargs: Passed to ``transformers.Trainer``.

    Raises:
        ValueError: On an unknown ``zo_optimizer`` or ``gradient_accumulation_steps != 1``.
    """

    def __init__(
        self,
        *args: Any,
        zo_optimizer: str | type[ZOOptimizer] = "engine",
        zo_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(zo_optimizer, str):
            if zo_optimizer not in OPTIMIZERS:
                raise ValueError(
                    f"zo_optimizer must be one of {sorted(OPTIMIZERS)}, got {zo_optimizer!r}"
                )
            zo_optimizer = OPTIMIZERS[zo_optimizer]
        # each optimizer takes (params, lr=..., **kwargs); ZOOptimizer's own __init__ does not
        self.zo_optimizer_cls: Callable[..., ZOOptimizer] = zo_optimizer
        self.zo_kwargs = dict(zo_kwargs or {})
        self._zo_skip_next = False  # the Trainer's own optimizer.step() after ours
        super().__init__(*args, **kwargs)
        if self.args.gradient_accumulation_steps != 1:
            raise ValueError(
                "ZOTrainer needs gradient_accumulation_steps=1, got "
                f"{self.args.gradient_accumulation_steps}"
            )

    def create_optimizer(self, model: Any = None) -> torch.optim.Optimizer:
        """Build the zeroth-order optimizer over the trainable parameters."""
        if self.optimizer is None:
            target = model if model is not None else self.model
            if target is None:
                raise ValueError("ZOTrainer needs a model to build its optimizer")
            params = [p for p in target.parameters() if p.requires_grad]
            optimizer = self.zo_optimizer_cls(params, lr=self.args.learning_rate, **self.zo_kwargs)
            original_step = optimizer.step

            def step(closure: Any = None) -> Any:
                if closure is None and self._zo_skip_next:
                    self._zo_skip_next = False
                    return None
                return original_step(closure)

            self.optimizer_zo: ZOOptimizer = optimizer
            optimizer.step = step  # type: ignore[method-assign]  # the Trainer calls it too
            self.optimizer = optimizer
        return self.optimizer

    def training_step(
        self, model: torch.nn.Module, inputs: dict[str, Any], num_items_in_batch: Any = None
    ) -> torch.Tensor:
        """One zeroth-order step on ``inputs``; returns the mean probe loss (detached)."""
        model.eval()
        inputs = self._prepare_inputs(inputs)

        def closure() -> torch.Tensor:
            loss = self.compute_loss(model, inputs)  # a tensor: return_outputs is False
            return loss[0] if isinstance(loss, tuple) else loss

        loss = self.optimizer_zo.step(closure)
        self._zo_skip_next = True
        return loss.detach().to(self.args.device)
