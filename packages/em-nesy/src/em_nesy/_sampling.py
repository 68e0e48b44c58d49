"""Sampling E-steps: rejection and ABC. The program is only evaluated, never differentiated."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from em_nesy._base import NEG, Logits, Posterior, log_probs
from em_nesy._validation import as_generator, check_program
from em_nesy.programs import SymbolicProgram


class _Sampler:
    """Draw ``z ~ p_theta(z | x)``, weight each draw, and summarise the weighted samples."""

    def __init__(
        self,
        program: SymbolicProgram,
        n_samples: int,
        generator: torch.Generator | int | None,
    ) -> None:
        check_program(program)
        if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 1:
            raise ValueError(f"n_samples (S) must be an int >= 1, got {n_samples!r}")
        self.program = program
        self.n_samples = n_samples
        self.generator = as_generator(generator)

    def _weights(self, z: np.ndarray, y: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Unnormalised float64 weights ``(B, S)`` and the exact-consistency mask."""
        raise NotImplementedError

    def _draw(self, logits: Logits, y: Any) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
        lp = log_probs(logits, self.program.domains)
        B, n, K = lp.shape
        cdf = lp.double().exp().cumsum(-1)
        cdf = cdf / cdf[..., -1:]  # inverse-CDF sampling; padded values are never drawn
        u = torch.rand(B, n, self.n_samples, dtype=torch.float64, generator=self.generator)
        z = torch.searchsorted(cdf, u, right=True).clamp_max(K - 1)
        z = z.permute(0, 2, 1).contiguous()  # (B, S, n)
        return lp, z, z.numpy()

    @torch.no_grad()
    def posterior(self, logits: Logits, y: Any) -> Posterior:
        """Weighted-sample marginals; examples with zero total weight are invalid."""
        lp, z, z_np = self._draw(logits, y)
        B, n, K = lp.shape
        w, acc = self._weights(z_np, y)
        if w.shape != (B, self.n_samples):
            raise ValueError(f"got {w.shape[0]} labels for a batch of {B} examples")
        total = w.sum(dim=1)
        valid = total > 0
        w = torch.where(valid[:, None], w / total.clamp_min(1e-300)[:, None], 0.0)
        marg = torch.zeros(B, n, K, dtype=torch.float64)
        marg.scatter_add_(2, z.permute(0, 2, 1), w[:, None, :].expand(B, n, self.n_samples))
        marg = torch.where(valid[:, None, None], marg, 1.0 / K).to(lp.dtype)
        frac = acc.double().mean(dim=1)
        log_ev = torch.where(frac > 0, frac.clamp_min(1e-300).log(), NEG).to(lp.dtype)
        stats = {
            "acceptance_rate": float(acc.double().mean()),
            "valid_frac": float(valid.double().mean()),
        }
        return Posterior(marg, valid, log_ev, stats, samples=z, weights=w.to(lp.dtype))

    @torch.no_grad()
    def map_state(self, logits: Logits, y: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Most probable sample among those with the largest weight (best accepted sample)."""
        lp, z, z_np = self._draw(logits, y)
        w, _ = self._weights(z_np, y)
        logp = lp.gather(2, z.permute(0, 2, 1)).sum(dim=1)  # (B, S)
        top = w == w.max(dim=1, keepdim=True).values
        score = torch.where(top & (w > 0), logp.double(), -torch.inf)
        best = score.argmax(dim=1)
        return z[torch.arange(z.shape[0]), best], w.sum(dim=1) > 0

    @torch.no_grad()
    def sample(
        self, logits: Logits, y: Any, n: int, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Resample ``n`` of the weighted draws per example: ``(B, n, vars)`` and validity."""
        _lp, z, z_np = self._draw(logits, y)
        w, _ = self._weights(z_np, y)
        valid = w.sum(dim=1) > 0
        w = torch.where(valid[:, None], w, 1.0)
        idx = torch.multinomial(w, n, replacement=True, generator=generator or self.generator)
        return z[torch.arange(z.shape[0])[:, None], idx], valid


class RejectionSampling(_Sampler):
    """Keep the draws ``z ~ p_theta(z | x)`` that satisfy ``c(z, y)``; empirical marginals.

    The accepted fraction estimates ``p(y | x)``; it collapses when ``p(y | x)`` is small
    (e.g. many digits), which the ``acceptance_rate`` statistic reports.

    Args:
        program: Any symbolic program.
        n_samples: Draws ``S`` per example (>= 1).
        generator: ``torch.Generator`` or int seed for reproducible draws.

    Example:
        >>> from em_nesy import MultiDigitAddition
        >>> eng = RejectionSampling(MultiDigitAddition(1), n_samples=2000, generator=0)
        >>> post = eng.posterior(torch.zeros(1, 2, 10), torch.tensor([[0, 0]]))
        >>> post.marginals[0, 0, 0].item()
        1.0
    """

    def __init__(
        self,
        program: SymbolicProgram,
        n_samples: int = 1024,
        generator: torch.Generator | int | None = None,
    ) -> None:
        super().__init__(program, n_samples, generator)

    def _weights(self, z: np.ndarray, y: Any) -> tuple[torch.Tensor, torch.Tensor]:
        acc = torch.from_numpy(np.asarray(self.program.consistent(z, y), dtype=bool))
        return acc.double(), acc


class ABCSampling(_Sampler):
    """Approximate-Bayesian-computation weights ``exp(-distance(f(z), y) / tau)``.

    ``tau -> 0`` recovers rejection sampling; larger ``tau`` keeps near misses, which gives
    a (biased) learning signal when exact matches are rare.

    Args:
        program: Any symbolic program.
        n_samples: Draws ``S`` per example (>= 1).
        tau: Temperature (> 0).
        distance: ``distance(z (B, S, n) int array, y) -> (B, S)`` non-negative array
            (default: ``program.distance``, digit-wise Hamming for addition).
        generator: ``torch.Generator`` or int seed.

    Example:
        >>> from em_nesy import MultiDigitAddition
        >>> eng = ABCSampling(MultiDigitAddition(2), n_samples=256, tau=0.5, generator=0)
        >>> post = eng.posterior(torch.zeros(1, 4, 10), torch.tensor([[0, 5, 7]]))
        >>> bool(post.valid[0])
        True
    """

    def __init__(
        self,
        program: SymbolicProgram,
        n_samples: int = 1024,
        tau: float = 0.5,
        distance: Callable[[np.ndarray, Any], np.ndarray] | None = None,
        generator: torch.Generator | int | None = None,
    ) -> None:
        super().__init__(program, n_samples, generator)
        if not tau > 0:
            raise ValueError(f"tau must be > 0, got {tau}")
        self.tau = float(tau)
        self.distance = distance or program.distance

    def _weights(self, z: np.ndarray, y: Any) -> tuple[torch.Tensor, torch.Tensor]:
        d = torch.from_numpy(np.asarray(self.distance(z, y), dtype=np.float64))
        if (d < 0).any() or not torch.isfinite(d).all():
            raise ValueError("distance must return finite non-negative values")
        return torch.exp(-d / self.tau), d == 0
