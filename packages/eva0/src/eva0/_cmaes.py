"""A small (mu/mu_w, lambda)-CMA-ES (Hansen 2016 tutorial defaults), numpy only."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray


class CMAES:
    """Ask/tell CMA-ES with full covariance, rank-one and rank-mu updates.

    The eigendecomposition of C is refreshed every ``popsize / (c1 + cmu) / d / 10``
    generations, as in Hansen's tutorial and the ``cma`` package.

    Args:
        x0: Initial mean, shape (d,).
        sigma0: Initial step size (> 0).
        popsize: Population size (default ``4 + floor(3 ln d)``).
        rng: numpy generator.
    """

    def __init__(
        self,
        x0: NDArray[np.float64],
        sigma0: float,
        popsize: int | None = None,
        rng: np.random.Generator | None = None,
    ) -> None:
        if not sigma0 > 0:
            raise ValueError(f"sigma0 must be > 0, got {sigma0}")
        self.mean = np.asarray(x0, dtype=np.float64).ravel().copy()
        d = self.dim = self.mean.size
        self.popsize = popsize or 4 + int(3 * math.log(d))
        if self.popsize < 2:
            raise ValueError(f"popsize must be >= 2, got {self.popsize}")
        self.sigma = float(sigma0)
        self.rng = rng if rng is not None else np.random.default_rng()
        mu = self.popsize // 2
        w = math.log(mu + 0.5) - np.log(np.arange(1, mu + 1))
        self.weights = w / w.sum()
        self.mu = mu
        self.mueff = 1.0 / float((self.weights**2).sum())
        me = self.mueff
        self.cc = (4 + me / d) / (d + 4 + 2 * me / d)
        self.cs = (me + 2) / (d + me + 5)
        self.c1 = 2 / ((d + 1.3) ** 2 + me)
        self.cmu = min(1 - self.c1, 2 * (me - 2 + 1 / me) / ((d + 2) ** 2 + me))
        self.damps = 1 + 2 * max(0.0, math.sqrt((me - 1) / (d + 1)) - 1) + self.cs
        self.chi_n = math.sqrt(d) * (1 - 1 / (4 * d) + 1 / (21 * d * d))
        self.pc = np.zeros(d)
        self.ps = np.zeros(d)
        self.B = np.eye(d)
        self.D = np.ones(d)
        self.C = np.eye(d)
        self.generation = 0
        self._eigen_at = 0
        self._inv_sqrt = np.eye(d)
        self._y: NDArray[np.float64] | None = None

    def ask(self) -> NDArray[np.float64]:
        """Return ``popsize`` candidates, shape (popsize, d)."""
        z = self.rng.standard_normal((self.popsize, self.dim))
        self._y = (z * self.D) @ self.B.T
        return self.mean + self.sigma * self._y

    def tell(self, fitness: NDArray[np.float64]) -> None:
        """Update from the fitness (lower is better) of the last ``ask``."""
        assert self._y is not None
        order = np.argsort(np.asarray(fitness))[: self.mu]
        y = self._y[order]
        yw = self.weights @ y
        self.mean = self.mean + self.sigma * yw
        d = self.dim
        inv_sqrt = self._inv_sqrt
        self.ps = (1 - self.cs) * self.ps + math.sqrt(self.cs * (2 - self.cs) * self.mueff) * (
            inv_sqrt @ yw
        )
        self.generation += 1
        ps_norm = float(np.linalg.norm(self.ps))
        hsig = (
            ps_norm / math.sqrt(1 - (1 - self.cs) ** (2 * self.generation))
            < (1.4 + 2 / (d + 1)) * self.chi_n
        )
        self.pc = (1 - self.cc) * self.pc + hsig * math.sqrt(
            self.cc * (2 - self.cc) * self.mueff
        ) * yw
        rank_mu = (y.T * self.weights) @ y
        self.C = (
            (1 - self.c1 - self.cmu) * self.C
            + self.c1 * (np.outer(self.pc, self.pc) + (not hsig) * self.cc * (2 - self.cc) * self.C)
            + self.cmu * rank_mu
        )
        self.sigma *= math.exp((self.cs / self.damps) * (ps_norm / self.chi_n - 1))
        # lazy eigendecomposition (Hansen's tutorial): O(d^3) only every few generations
        if self.generation - self._eigen_at > self.popsize / (self.c1 + self.cmu) / d / 10:
            self._eigen_at = self.generation
            self.C = np.triu(self.C) + np.triu(self.C, 1).T
            eig, self.B = np.linalg.eigh(self.C)
            self.D = np.sqrt(np.maximum(eig, 1e-20))
            self._inv_sqrt = (self.B / self.D) @ self.B.T
