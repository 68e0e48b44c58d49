"""Float64 references for the ess-flow tests: the closed-form linear-Gaussian posterior.

Generator ``T(z) = A z + b``, observation ``y = C x + N(0, sigma^2 I)`` and source
``z ~ N(mu, Sigma0)``: the posterior over ``z`` is Gaussian with precision
``P = Sigma0^{-1} + M^T M / sigma^2`` (``M = C A``) and mean
``P^{-1} (Sigma0^{-1} mu + M^T (y - C b) / sigma^2)``.
"""

from __future__ import annotations

import torch


def linear_gaussian_problem(d: int, seed: int = 0):
    """A random well-conditioned ``(A, b, C, y)`` in float64 (3 observed coordinates)."""
    g = torch.Generator().manual_seed(seed)
    A = torch.eye(d, dtype=torch.float64) + 0.3 * torch.randn(
        d, d, generator=g, dtype=torch.float64
    )
    b = torch.randn(d, generator=g, dtype=torch.float64)
    C = torch.randn(3, d, generator=g, dtype=torch.float64)
    y = torch.randn(3, generator=g, dtype=torch.float64)
    return A, b, C, y


def linear_gaussian_posterior(A, b, C, y, mu, Sigma0, sigma):
    """Mean and covariance of ``p(z | y)`` for the problem above."""
    M = C @ A
    P = torch.linalg.inv(Sigma0) + M.T @ M / sigma**2
    S = torch.linalg.inv(P)
    m = S @ (torch.linalg.solve(Sigma0, mu) + M.T @ (y - C @ b) / sigma**2)
    return m, S


def conditioned_linear_problem(d: int = 16, condition: float = 10.0, seed: int = 0):
    """``T(z) = A z + b`` with singular values log-spaced in ``[1, condition]``, ``y = T(z) + e``.

    ``e ~ N(0, I)``. Returns ``(A, b, y, m, S)`` with the closed-form posterior mean and
    covariance ``S = (I + A^T A)^{-1}`` of ``z`` (float64); the same problem as
    ``bench/linear16.py`` for the same seed.
    """
    g = torch.Generator().manual_seed(1000 + seed)
    q1, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    q2, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    s = torch.logspace(0, torch.log10(torch.tensor(condition)).item(), d, dtype=torch.float64)
    A = q1 @ torch.diag(s) @ q2.T
    b = torch.randn(d, generator=g, dtype=torch.float64)
    z_true = torch.randn(d, generator=g, dtype=torch.float64)
    y = A @ z_true + b + torch.randn(d, generator=g, dtype=torch.float64)
    C = torch.eye(d, dtype=torch.float64)
    m, S = linear_gaussian_posterior(A, b, C, y, torch.zeros(d, dtype=torch.float64), C, 1.0)
    return A, b, y, m, S
