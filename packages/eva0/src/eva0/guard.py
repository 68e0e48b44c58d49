"""A label-free safety guard for test-time adaptation, from the two passes EVA-0 already makes.

Entropy minimisation on a shifted stream can fail in two ways that the predictions show
without labels: the predictions *collapse* onto a few classes (the batch's marginal prediction
entropy falls) or the adapted weights land somewhere worse (the loss rises). The guard keeps
slow running means of both, compares them with their values over the first ``warmup`` batches
(taken at, or next to, the source weights θ₀) and asks for a reset to the anchor when either
drifts by more than ``tolerance · ln C`` nats. After ``max_resets`` resets adaptation is
judged unsafe for this stream and stops (the wrapper still predicts with its two passes).
"""

from __future__ import annotations

import math

import torch

__all__ = ["CollapseGuard"]


class CollapseGuard:
    """Watch marginal prediction entropy and loss; say when to reset to the anchor.

    Args:
        tolerance: Allowed fall of the marginal entropy, and rise of the loss, in units of
            ``ln C`` (> 0).
        warmup: Batches that set the reference values.
        momentum: Weight of the newest batch in the running means, in (0, 1].
        max_resets: Resets after which :attr:`frozen` becomes True.

    Raises:
        ValueError: On an out-of-range argument.
    """

    def __init__(
        self, tolerance: float, warmup: int = 5, momentum: float = 0.2, max_resets: int = 2
    ) -> None:
        if not tolerance > 0:
            raise ValueError(f"guard tolerance must be > 0, got {tolerance}")
        if warmup < 1 or max_resets < 1:
            raise ValueError(f"warmup and max_resets must be >= 1, got {warmup}, {max_resets}")
        if not 0 < momentum <= 1:
            raise ValueError(f"guard momentum must be in (0, 1], got {momentum}")
        self.tolerance, self.warmup = float(tolerance), int(warmup)
        self.momentum, self.max_resets = float(momentum), int(max_resets)
        self.reset()

    def reset(self) -> None:
        """Forget the references and the running means (a new stream)."""
        self.seen = 0
        self.resets = 0
        self.frozen = False
        self.ref_diversity = 0.0
        self.ref_loss = 0.0
        self.diversity = math.nan
        self.loss = math.nan

    def observe(self, p_bar: torch.Tensor, loss: float) -> bool:
        """Record one batch (averaged probabilities (B, C), mean loss); True: reset now."""
        C = p_bar.shape[1]
        marginal = p_bar.mean(0)
        div = float(-(marginal * marginal.clamp_min(1e-12).log()).sum())
        self.seen += 1
        if self.seen <= self.warmup:  # references: plain means over the warm-up batches
            self.ref_diversity += (div - self.ref_diversity) / self.seen
            self.ref_loss += (loss - self.ref_loss) / self.seen
            self.diversity, self.loss = self.ref_diversity, self.ref_loss
            return False
        mu = self.momentum
        self.diversity = (1 - mu) * self.diversity + mu * div
        self.loss = (1 - mu) * self.loss + mu * loss
        slack = self.tolerance * math.log(C)
        if self.diversity < self.ref_diversity - slack or self.loss > self.ref_loss + slack:
            self.resets += 1
            self.frozen = self.resets >= self.max_resets
            self.diversity, self.loss = self.ref_diversity, self.ref_loss
            return True
        return False
