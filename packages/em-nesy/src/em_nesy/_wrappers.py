"""Hard and stochastic EM: wrappers that turn an engine's MAP state or samples into targets."""

from __future__ import annotations

from typing import Any

import torch

from em_nesy._base import Logits, Posterior, one_hot
from em_nesy._validation import as_generator


def _kmax(engine: Any, logits: Logits) -> int:
    if isinstance(logits, torch.Tensor):
        return int(logits.shape[-1])
    return max(int(t.shape[-1]) for t in logits)


def _dtype(logits: Logits) -> torch.dtype:
    return logits.dtype if isinstance(logits, torch.Tensor) else logits[0].dtype


class HardEM:
    """Hard EM: the target is the one-hot of the most probable consistent assignment.

    Uses the wrapped engine's ``map_state`` (max-product DP for :class:`AdditionDP`, max-product
    BP for :class:`BeliefPropagation`, the best accepted sample for samplers, argmax for
    :class:`Enumeration`).

    Args:
        engine: An engine with ``map_state(logits, y) -> (z, valid)``.

    Example:
        >>> from em_nesy import AdditionDP, MultiDigitAddition
        >>> eng = HardEM(AdditionDP(MultiDigitAddition(1)))
        >>> eng.posterior(torch.zeros(1, 2, 10), torch.tensor([[1, 8]])).marginals[0, :, 9].tolist()
        [1.0, 1.0]
    """

    def __init__(self, engine: Any) -> None:
        if not hasattr(engine, "map_state"):
            raise TypeError(f"HardEM needs an engine with map_state, got {type(engine).__name__}")
        self.engine = engine

    @torch.no_grad()
    def posterior(self, logits: Logits, y: Any) -> Posterior:
        """One-hot targets at the MAP assignment; invalid where none is consistent."""
        z, valid = self.engine.map_state(logits, y)
        marg = one_hot(z, _kmax(self.engine, logits), _dtype(logits))
        return Posterior(marg, valid, None, {"valid_frac": float(valid.float().mean())})


class StochasticEM:
    """Stochastic EM: targets are the average one-hot of ``n`` posterior samples.

    Args:
        engine: An engine with ``sample(logits, y, n, generator) -> (z, valid)``
            (:class:`Enumeration` and :class:`AdditionDP` sample exactly; samplers resample
            their weighted draws).
        n: Posterior samples per example (>= 1).
        generator: ``torch.Generator`` or int seed.

    Example:
        >>> from em_nesy import AdditionDP, MultiDigitAddition
        >>> eng = StochasticEM(AdditionDP(MultiDigitAddition(1)), n=4, generator=0)
        >>> eng.posterior(torch.zeros(1, 2, 10), torch.tensor([[0, 0]])).marginals[0, 0, 0].item()
        1.0
    """

    def __init__(
        self, engine: Any, n: int = 1, generator: torch.Generator | int | None = None
    ) -> None:
        if not hasattr(engine, "sample"):
            raise TypeError(
                f"StochasticEM needs an engine with sample, got {type(engine).__name__}"
            )
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an int >= 1, got {n!r}")
        self.engine, self.n, self.generator = engine, n, as_generator(generator)

    @torch.no_grad()
    def posterior(self, logits: Logits, y: Any) -> Posterior:
        """Sample-average one-hot targets, with the samples and uniform weights attached."""
        z, valid = self.engine.sample(logits, y, self.n, self.generator)
        dtype = _dtype(logits)
        marg = one_hot(z, _kmax(self.engine, logits), dtype).mean(dim=1)
        w = torch.full(z.shape[:2], 1.0 / self.n, dtype=dtype) * valid[:, None]
        stats = {"valid_frac": float(valid.float().mean())}
        return Posterior(marg, valid, None, stats, samples=z, weights=w)
