"""Lightning integration: checkpoints, validation and the weights after ``fit()`` at theta.

During training the parameters hold the lookahead point ``y``; checkpoints and validation
should see the base iterate ``theta``. :class:`EMANesterovLightningCallback` writes theta into
every checkpoint's ``state_dict`` (and records in the optimizer state that it was saved at
theta, so resuming is exact), moves the model to theta for validation and at the end of
``fit()``, and back to ``y`` before every training batch. Install with
``pip install "ema-nesterov[lightning]"``.

Example:
    >>> trainer = lightning.pytorch.Trainer(
    ...     callbacks=[EMANesterovLightningCallback()])  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Callback
from lightning.pytorch.callbacks import ModelCheckpoint

from ema_nesterov._ema_nesterov import EMANesterov

__all__ = ["EMANesterovLightningCallback"]


def _wrappers(trainer: Any) -> list[tuple[int, EMANesterov]]:
    """``(index, wrapper)`` for every :class:`EMANesterov` among the trainer's optimizers."""
    found = []
    for i, opt in enumerate(trainer.optimizers):
        inner = getattr(opt, "_optimizer", opt)  # a LightningOptimizer wraps the real one
        if isinstance(inner, EMANesterov):
            found.append((i, inner))
    return found


class EMANesterovLightningCallback(Callback):
    """Keep Lightning checkpoints, validation and the post-``fit()`` weights on theta.

    Checkpoints written with ``save_weights_only=True`` skip callbacks' checkpoint hooks in
    Lightning, so they cannot be corrected here: such a ``ModelCheckpoint`` is refused.
    """

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        """Fail before the first step: no EMANesterov, or a weights-only checkpoint callback."""
        if not _wrappers(trainer):
            names = [type(getattr(o, "_optimizer", o)).__name__ for o in trainer.optimizers]
            raise TypeError(
                "EMANesterovLightningCallback needs configure_optimizers() to return an "
                f"EMANesterov; got {names}"
            )
        for cb in trainer.callbacks:
            if isinstance(cb, ModelCheckpoint) and cb.save_weights_only:
                raise ValueError(
                    "ModelCheckpoint(save_weights_only=True) bypasses the callback, so its "
                    "files would hold the lookahead point y; use save_weights_only=False"
                )

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, idx: int) -> None:
        """Back to the lookahead point y: this batch's gradients are taken there."""
        for _, opt in _wrappers(trainer):
            opt.train()

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        """Validate at theta."""
        for _, opt in _wrappers(trainer):
            opt.eval()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        """Leave theta in the model for ``validate()``, ``test()`` and export after ``fit()``."""
        for _, opt in _wrappers(trainer):
            opt.eval()

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict) -> None:
        """Theta into the checkpoint's weights; its optimizer state then says eval mode."""
        names = {id(p): n for n, p in pl_module.named_parameters()}
        weights = checkpoint["state_dict"]
        for i, opt in _wrappers(trainer):
            if not opt.training:  # the parameters hold theta already
                continue
            for group in opt.param_groups:
                for p in group["params"]:
                    name = names.get(id(p))
                    if name in weights:
                        weights[name] = opt.theta(p).to(weights[name].device)
            states = checkpoint.get("optimizer_states")
            if states:  # a fresh dict per save: the live optimizer is not touched
                states[i]["ema"]["training"] = False
