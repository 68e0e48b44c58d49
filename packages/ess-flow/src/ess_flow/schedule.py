"""The iteration schedule of an ESS-Flow run and the chains' mutable state (package-internal).

:class:`RunSchedule` says, per iteration, which generator and likelihood temperature are used
and whether the draw is kept; :class:`ChainState` holds the current whitened states, their
log-likelihoods and outputs, the cost counters and the kept draws.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

__all__ = ["ChainState", "RunSchedule"]


@dataclass
class RunSchedule:
    """Which generator and temperature each iteration uses, and which iterations are kept."""

    n_chains: int
    n_iter: int
    burn_in: int
    thin: int
    anneal_iters: int
    low_fidelity_iters: int
    warm_generator: Callable[[torch.Tensor], torch.Tensor]
    main_generator: Callable[[torch.Tensor], torch.Tensor]

    @property
    def n_warm(self) -> int:
        """Warm-up iterations (tempered and / or low-fidelity), never returned."""
        return self.anneal_iters + self.low_fidelity_iters

    @property
    def total(self) -> int:
        """All iterations: warm-up plus main."""
        return self.n_warm + self.n_iter

    def generator_at(self, it: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """The generator iteration ``it`` evaluates (low fidelity during warm-up)."""
        return self.warm_generator if it < self.n_warm else self.main_generator

    def beta_at(self, it: int) -> float:
        """Likelihood temperature: the ramp ``(k + 1) / (anneal_iters + 1)``, then 1."""
        return (it + 1) / (self.anneal_iters + 1) if it < self.anneal_iters else 1.0

    def keeps(self, it: int) -> bool:
        """Whether iteration ``it`` is kept (after warm-up and burn-in, every ``thin``-th)."""
        j = it - self.n_warm
        return j >= self.burn_in and (j - self.burn_in) % self.thin == 0


@dataclass
class ChainState:
    """Current whitened states of all chains, their log-likelihoods, outputs and kept draws."""

    w: torch.Tensor
    ell: torch.Tensor
    x: torch.Tensor
    calls_per_iter: list[int] = field(default_factory=list)
    n_max_shrink: int = 0
    kept_z: list[torch.Tensor] = field(default_factory=list)
    kept_x: list[torch.Tensor] = field(default_factory=list)
    kept_ell: list[torch.Tensor] = field(default_factory=list)

    def keep(self, z: torch.Tensor, return_x: bool) -> None:
        """Store copies of the current source states, log-likelihoods and (optionally) x."""
        self.kept_z.append(z.clone())
        self.kept_ell.append(self.ell.clone())
        if return_x:
            self.kept_x.append(self.x.clone())
