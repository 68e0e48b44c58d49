"""Hugging Face ``Trainer`` integration: checkpoints, ``save_model()`` and evaluation at theta.

During training the parameters hold the lookahead point ``y``; a checkpoint or an evaluation
should see the base iterate ``theta``. :class:`EMANesterovCallback` moves the model to ``theta``
(``opt.eval()``) whenever the step that just ended will be followed by an evaluation or a save,
and at the end of training, and back to ``y`` (``opt.train()``) before the next step begins.
Install with ``pip install "ema-nesterov[hf]"``.

Example:
    >>> trainer = Trainer(model, args, optimizers=(opt, None),
    ...                   callbacks=[EMANesterovCallback()])  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from ema_nesterov._ema_nesterov import EMANesterov

__all__ = ["EMANesterovCallback", "find_ema_nesterov"]


def find_ema_nesterov(optimizer: Any) -> EMANesterov:
    """The :class:`EMANesterov` inside ``optimizer`` (unwrapping accelerate's ``.optimizer``).

    Raises:
        TypeError: If no ``EMANesterov`` is found (the Trainer built its own optimizer).
    """
    seen, current = 0, optimizer
    while current is not None and seen < 8:
        if isinstance(current, EMANesterov):
            return current
        current, seen = getattr(current, "optimizer", None), seen + 1
    raise TypeError(
        "EMANesterovCallback needs the Trainer to use an EMANesterov optimizer: pass "
        "Trainer(..., optimizers=(EMANesterov(base), scheduler)); got "
        f"{type(optimizer).__name__}"
    )


class EMANesterovCallback(TrainerCallback):
    """Keep Trainer checkpoints, ``save_model()`` and evaluation on theta, training on y.

    Add it after Trainer's default callbacks (``callbacks=[EMANesterovCallback()]`` does):
    it reads the ``should_evaluate``/``should_save`` flags they set at the end of each step.
    After ``train()`` returns the model holds theta, so ``trainer.evaluate()`` and
    ``trainer.save_model()`` need nothing more; a later ``train()`` resumes from y.
    """

    @staticmethod
    def _opt(kwargs: dict[str, Any]) -> EMANesterov:
        return find_ema_nesterov(kwargs.get("optimizer"))

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Check the optimizer now: fail before the first step, not at the first save."""
        self._opt(kwargs)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Back to the lookahead point y: the gradients of this step are taken there."""
        self._opt(kwargs).train()

    def _theta_if_needed(self, state: Any, control: Any, kwargs: dict[str, Any]) -> None:
        last = state.max_steps and state.global_step >= state.max_steps
        if control.should_evaluate or control.should_save or control.should_training_stop or last:
            self._opt(kwargs).eval()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Theta into the model when an evaluation, a save or the end follows this step."""
        self._theta_if_needed(state, control, kwargs)

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """The same for the evaluations and saves of an ``"epoch"`` strategy."""
        self._theta_if_needed(state, control, kwargs)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Leave theta in the model for ``evaluate()``/``save_model()`` after training."""
        self._opt(kwargs).eval()
