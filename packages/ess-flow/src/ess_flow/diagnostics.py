"""MCMC diagnostics and sample-set distances (numpy / scipy / torch, no extra dependencies).

Two families of chain diagnostics: the classic split-R-hat and Geyer ``n_eff``
(:func:`rhat`, :func:`effective_sample_size`), and the rank-normalised estimators of
Vehtari, Gelman, Simpson, Carpenter & Bürkner (2021), *Rank-normalization, folding, and
localization: an improved R-hat for assessing convergence of MCMC*, Bayesian Analysis 16(2)
(:func:`rank_rhat`, :func:`ess_bulk`, :func:`ess_tail`), which are what ArviZ and Stan report.
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray
from scipy.fft import next_fast_len
from scipy.special import ndtri
from scipy.stats import rankdata

__all__ = [
    "effective_sample_size",
    "ess_bulk",
    "ess_tail",
    "kabsch_rmsd",
    "mmd_rbf",
    "rank_rhat",
    "rhat",
    "sliced_wasserstein",
]


def _draws(samples: ArrayLike | torch.Tensor) -> NDArray[np.float64]:
    if isinstance(samples, torch.Tensor):
        samples = samples.detach().cpu().double().numpy()
    arr = np.asarray(samples, dtype=np.float64)
    if arr.ndim < 2:
        raise ValueError(f"samples must have shape (n_draws, n_chains, ...), got {arr.shape}")
    if arr.shape[0] < 4:
        raise ValueError(f"need at least 4 draws per chain, got {arr.shape[0]}")
    return arr.reshape(arr.shape[0], arr.shape[1], -1)


def rhat(samples: ArrayLike | torch.Tensor) -> NDArray[np.float64]:
    """Split-R-hat (Gelman et al., BDA3) per coordinate.

    Args:
        samples: Draws of shape ``(n_draws, n_chains, ...)``.

    Returns:
        Array of shape ``(prod(...),)``; values near 1 indicate mixing.

    Raises:
        ValueError: If fewer than 4 draws or fewer than 2 dimensions are given.
    """
    x = _draws(samples)
    half = x.shape[0] // 2
    split = np.concatenate([x[:half], x[half : 2 * half]], axis=1)  # (half, 2m, d)
    n = split.shape[0]
    chain_mean = split.mean(0)
    chain_var = split.var(0, ddof=1)
    W = chain_var.mean(0)
    B = n * chain_mean.var(0, ddof=1)
    var_plus = (n - 1) / n * W + B / n
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.sqrt(var_plus / W)
    return np.where(W > 0, r, 1.0)


def effective_sample_size(samples: ArrayLike | torch.Tensor) -> NDArray[np.float64]:
    """Multi-chain effective sample size ``n_eff`` per coordinate (Geyer initial sequence).

    Autocorrelations are averaged over chains (BDA3 eq. 11.7) and summed over Geyer's
    initial positive, monotone sequence of paired lags.

    Args:
        samples: Draws of shape ``(n_draws, n_chains, ...)``.

    Returns:
        ``n_eff`` of shape ``(prod(...),)`` (it may exceed ``n_draws * n_chains`` for
        antithetic chains).
    """
    x = _draws(samples)
    n, m, d = x.shape
    xc = x - x.mean(0, keepdims=True)
    nfft = 1 << int(np.ceil(np.log2(2 * n)))
    f = np.fft.rfft(xc, n=nfft, axis=0)
    acov = np.fft.irfft(f * np.conj(f), n=nfft, axis=0)[:n] / n  # (n, m, d)
    chain_var = acov[0] * n / (n - 1)
    W = chain_var.mean(0)
    B_over_n = x.mean(0).var(0, ddof=1) if m > 1 else np.zeros(d)
    var_plus = (n - 1) / n * W + B_over_n
    out = np.empty(d)
    for j in range(d):
        if var_plus[j] <= 0:
            out[j] = float(n * m)
            continue
        rho = 1.0 - (W[j] - acov[:, :, j].mean(1)) / var_plus[j]
        rho[0] = 1.0
        # Geyer: sum pairs Gamma_k = rho_{2k} + rho_{2k+1} while positive, made monotone.
        pairs = rho[: 2 * (n // 2)].reshape(-1, 2).sum(1)
        total = 0.0
        prev = np.inf
        for g in pairs:
            if g <= 0:
                break
            g = min(g, prev)
            total += g
            prev = g
        tau = -1.0 + 2.0 * total
        out[j] = n * m / max(tau, 1e-12)
    return out


def _split_chains(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """``(n, m, d) -> (n // 2, 2 m, d)``: first and last halves (a middle draw is dropped)."""
    half = x.shape[0] // 2
    return np.concatenate([x[:half], x[x.shape[0] - half :]], axis=1)


def _z_scale(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Rank-normalise per coordinate over all draws of all chains (Blom offsets 3/8)."""
    n, m, d = x.shape
    ranks = rankdata(x.reshape(n * m, d), method="average", axis=0)
    return ndtri((ranks - 0.375) / (n * m + 0.25)).reshape(n, m, d)


def _basic_rhat(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Gelman-Rubin R-hat of ``(n, m, d)`` chains: ``sqrt((B / W + n - 1) / n)``."""
    n = x.shape[0]
    between = n * x.mean(0).var(0, ddof=1)
    within = x.var(0, ddof=1).mean(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + n - 1) / n)


def _geyer_ess(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """ESS of ``(n, m, d)`` chains with Geyer's initial positive and monotone sequences.

    Mirrors Stan / ArviZ step by step (vectorised over coordinates): pair sums
    ``rho_{2k} + rho_{2k+1}`` are accumulated while positive, made monotone by a running
    minimum, the last even autocorrelation is added when positive, and ``tau`` is floored at
    ``1 / log10(n m)``.
    """
    n, m, d = x.shape
    size = n * m
    xc = x - x.mean(0, keepdims=True)
    nfft = next_fast_len(2 * n)
    f = np.fft.rfft(xc, n=nfft, axis=0)
    acov = np.fft.irfft(f * np.conj(f), n=nfft, axis=0)[:n] / n  # (n, m, d)
    mean_var = acov[0].mean(0) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus = var_plus + x.mean(0).var(0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var - acov.mean(1)) / var_plus  # (n, d)
    rho[0] = 1.0
    total, run_min = np.zeros(d), np.full(d, np.inf)
    pair, even = rho[0] + rho[1], np.ones(d)
    n_pairs = np.zeros(d, dtype=int)
    active = np.ones(d, dtype=bool)
    t = 1
    while t < n - 3:
        active &= pair > 0
        if not active.any():
            break
        run_min = np.where(active, np.minimum(run_min, pair), run_min)
        total = np.where(active, total + run_min, total)
        pair = np.where(active, rho[t + 1] + rho[t + 2], pair)
        even = np.where(active, rho[t + 1], even)
        n_pairs += active
        t += 2
    last_even = np.where((even > 0) | ((pair >= 0) & (n_pairs >= 1)), even, 0.0)
    tau = np.maximum(-1.0 + 2.0 * total + last_even, 1.0 / np.log10(size))
    out = size / tau
    out = np.where(np.isnan(rho).any(0), np.nan, out)
    constant = (x.max((0, 1)) - x.min((0, 1))) < np.finfo(float).resolution
    return np.where(constant, float(size), out)


def rank_rhat(samples: ArrayLike | torch.Tensor) -> NDArray[np.float64]:
    """Rank-normalised split-R-hat per coordinate (Vehtari et al. 2021, eq. 4.1-4.2).

    The larger of the split-R-hat of the rank-normalised draws (bulk) and of the
    rank-normalised draws folded around the median (tails). Values above 1.01 say the chains
    have not yet mixed.

    Args:
        samples: Draws of shape ``(n_draws, n_chains, ...)`` (at least 4 draws).

    Returns:
        Array of shape ``(prod(...),)``; NaN for a coordinate that is constant over all draws.
    """
    x = _split_chains(_draws(samples))
    folded = np.abs(x - np.median(x.reshape(-1, x.shape[-1]), axis=0))
    return np.maximum(_basic_rhat(_z_scale(x)), _basic_rhat(_z_scale(folded)))


def ess_bulk(samples: ArrayLike | torch.Tensor) -> NDArray[np.float64]:
    """Bulk effective sample size per coordinate: Geyer ESS of the rank-normalised split chains.

    Args:
        samples: Draws of shape ``(n_draws, n_chains, ...)`` (at least 4 draws).

    Returns:
        Array of shape ``(prod(...),)`` (Vehtari et al. 2021, Section 4.2).
    """
    return _geyer_ess(_z_scale(_split_chains(_draws(samples))))


def ess_tail(samples: ArrayLike | torch.Tensor, prob: float = 0.05) -> NDArray[np.float64]:
    """Tail effective sample size: the smaller ESS of the indicators at the two tail quantiles.

    Args:
        samples: Draws of shape ``(n_draws, n_chains, ...)`` (at least 4 draws).
        prob: Tail probability; quantiles ``prob`` and ``1 - prob`` (default 5 % and 95 %).

    Returns:
        Array of shape ``(prod(...),)`` (Vehtari et al. 2021, Section 4.3).

    Raises:
        ValueError: If ``prob`` is not in ``(0, 0.5)``.
    """
    if not 0.0 < prob < 0.5:
        raise ValueError(f"prob must be in (0, 0.5), got {prob}")
    x = _draws(samples)
    flat = x.reshape(-1, x.shape[-1])
    lo, hi = np.quantile(flat, [prob, 1.0 - prob], axis=0)
    ess_lo = _geyer_ess(_split_chains((x <= lo).astype(np.float64)))
    ess_hi = _geyer_ess(_split_chains((x <= hi).astype(np.float64)))
    return np.minimum(ess_lo, ess_hi)


def _as_2d(a: ArrayLike | torch.Tensor) -> NDArray[np.float64]:
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().double().numpy()
    arr = np.asarray(a, dtype=np.float64)
    return arr.reshape(arr.shape[0], -1)


def sliced_wasserstein(
    a: ArrayLike | torch.Tensor,
    b: ArrayLike | torch.Tensor,
    n_projections: int = 100,
    random_state: int | np.random.Generator | None = 0,
    n_quantiles: int = 1000,
) -> float:
    """Sliced Wasserstein-2 distance between two sample sets (rows are samples).

    ``SW2 = sqrt(mean_theta W2^2(theta^T a, theta^T b))`` over random unit directions; the 1-D
    distances compare ``n_quantiles`` matched quantiles, so set sizes may differ.

    Raises:
        ValueError: If the dimensions differ or ``n_projections < 1``.
    """
    A, Bm = _as_2d(a), _as_2d(b)
    if A.shape[1] != Bm.shape[1]:
        raise ValueError(f"dimension mismatch: {A.shape[1]} vs {Bm.shape[1]}")
    if n_projections < 1:
        raise ValueError(f"n_projections must be >= 1, got {n_projections}")
    rng = np.random.default_rng(random_state)
    dirs = rng.standard_normal((A.shape[1], n_projections))
    dirs /= np.linalg.norm(dirs, axis=0, keepdims=True)
    qs = (np.arange(n_quantiles) + 0.5) / n_quantiles
    pa = np.quantile(A @ dirs, qs, axis=0)
    pb = np.quantile(Bm @ dirs, qs, axis=0)
    return float(np.sqrt(np.mean((pa - pb) ** 2)))


def mmd_rbf(
    a: ArrayLike | torch.Tensor, b: ArrayLike | torch.Tensor, bandwidth: float | None = None
) -> float:
    """Unbiased squared MMD with a Gaussian kernel (median-heuristic bandwidth by default)."""
    A, Bm = _as_2d(a), _as_2d(b)
    Z = np.concatenate([A, Bm])
    d2 = ((Z[:, None, :] - Z[None, :, :]) ** 2).sum(-1)
    if bandwidth is None:
        bandwidth = float(np.sqrt(0.5 * np.median(d2[d2 > 0]))) if np.any(d2 > 0) else 1.0
    K = np.exp(-d2 / (2 * bandwidth**2))
    n, m = len(A), len(Bm)
    kaa, kbb, kab = K[:n, :n], K[n:, n:], K[:n, n:]
    term_a = (kaa.sum() - np.trace(kaa)) / (n * (n - 1))
    term_b = (kbb.sum() - np.trace(kbb)) / (m * (m - 1))
    return float(term_a + term_b - 2 * kab.mean())


def kabsch_rmsd(P: ArrayLike | torch.Tensor, Q: ArrayLike | torch.Tensor) -> NDArray[np.float64]:
    """RMSD after optimal rigid superposition (Kabsch), batched over leading dimensions.

    Args:
        P: Coordinates ``(..., n_points, 3)`` (or ``(..., 3 * n_points)``).
        Q: Reference coordinates, broadcastable to ``P``.

    Returns:
        RMSD per structure, shape ``P.shape[:-2]`` (a 0-d array for a single pair).
    """
    p = P.detach().cpu().double().numpy() if isinstance(P, torch.Tensor) else np.asarray(P, float)
    q = Q.detach().cpu().double().numpy() if isinstance(Q, torch.Tensor) else np.asarray(Q, float)
    if p.shape[-1] != 3:
        p = p.reshape(*p.shape[:-1], -1, 3)
    if q.shape[-1] != 3:
        q = q.reshape(*q.shape[:-1], -1, 3)
    p, q = np.broadcast_arrays(p, q)
    pc = p - p.mean(-2, keepdims=True)
    qc = q - q.mean(-2, keepdims=True)
    H = np.swapaxes(pc, -1, -2) @ qc
    U, _, Vt = np.linalg.svd(H)
    d = np.sign(np.linalg.det(U @ Vt))
    D = np.zeros(H.shape)
    D[..., 0, 0] = 1.0
    D[..., 1, 1] = 1.0
    D[..., 2, 2] = d
    R = U @ D @ Vt
    diff = pc @ R - qc
    return np.sqrt((diff**2).sum(-1).mean(-1))
