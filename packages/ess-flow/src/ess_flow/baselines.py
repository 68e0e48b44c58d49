"""Baselines: DPS-style gradient guidance, sampling-importance-resampling and pCN.

They share the source-space view of ESS-Flow (SIR, pCN) or need gradients (DPS), and are
what the benchmark compares against at equal numbers of generator evaluations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from methodkit import progress as show_progress
from methodkit.torch import generator as seeded_generator

__all__ = [
    "PCNResult",
    "SIRResult",
    "dps_flow_sample",
    "dps_guidance",
    "pcn_sample",
    "sir_sample",
]

Velocity = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
LogLik = Callable[[torch.Tensor], torch.Tensor]


def _rng(generator: torch.Generator | None, seed: int | None) -> torch.Generator:
    if generator is not None:
        return generator
    return seeded_generator(None if seed is None else int(seed))


def _shape(source_shape: tuple[int, ...] | int) -> tuple[int, ...]:
    shape = (source_shape,) if isinstance(source_shape, int) else tuple(source_shape)
    if not shape or any(not isinstance(s, int) or s < 1 for s in shape):
        raise ValueError(f"shape must be a tuple of positive ints, got {source_shape!r}")
    return shape


def _positive_int(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def dps_guidance(velocity: Velocity, log_lik: LogLik, x: torch.Tensor, t: float) -> torch.Tensor:
    r"""DPS guidance term for a linear-path flow at time ``t``.

    .. math:: \hat x_1 = x_t + (1 - t)\, v(x_t, t), \qquad
              g = \nabla_{x_t} \log g(y \mid \hat x_1)

    Raises:
        RuntimeError: If ``log_lik`` returns no gradient (non-differentiable observation):
            use ESS-Flow, which needs none.
    """
    with torch.enable_grad():
        xt = x.detach().requires_grad_(True)
        tt = torch.full((x.shape[0],), float(t), dtype=x.dtype, device=x.device)
        x1_hat = xt + (1.0 - t) * velocity(xt, tt)
        ll = log_lik(x1_hat)
        if not isinstance(ll, torch.Tensor) or not ll.requires_grad:
            raise RuntimeError(
                "dps_flow_sample: the log-likelihood returned no gradient (it is not "
                "differentiable in x); use ess_flow.ESSFlow, which needs forward passes only"
            )
        (grad,) = torch.autograd.grad(ll.sum(), xt, allow_unused=True)
    if grad is None:
        raise RuntimeError(
            "dps_flow_sample: the log-likelihood does not depend differentiably on x; "
            "use ess_flow.ESSFlow, which needs forward passes only"
        )
    return grad.detach()


def dps_flow_sample(
    velocity: Velocity,
    log_lik: LogLik,
    shape: tuple[int, ...] | int,
    n_samples: int,
    n_steps: int = 20,
    scale: float = 1.0,
    *,
    generator: torch.Generator | None = None,
    seed: int | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """DPS-style guided Euler sampling of a linear-path flow (``t = 0`` noise to ``t = 1`` data).

    Each Euler step uses ``v(x_t, t) + scale * dps_guidance(...)``. Approximate: the guidance
    is a heuristic, not an exact posterior sampler.

    Args:
        velocity: ``velocity(x, t)`` (must be differentiable).
        log_lik: Differentiable ``x -> log g(y | x)``.
        shape: Shape of one sample.
        n_samples: Number of samples (>= 1).
        n_steps: Euler steps (>= 1).
        scale: Guidance scale (>= 0).
        generator: ``torch.Generator`` for the initial noise.
        seed: Used if ``generator`` is None.
        device: Device of the samples.
        dtype: Dtype of the samples.

    Returns:
        Samples ``(n_samples, *shape)``.

    Raises:
        ValueError: For invalid sizes or a negative scale.
        RuntimeError: If the likelihood gives no gradient.
    """
    shp = _shape(shape)
    _positive_int("n_samples", n_samples)
    _positive_int("n_steps", n_steps)
    if not scale >= 0:
        raise ValueError(f"scale must be >= 0, got {scale}")
    rng = _rng(generator, seed)
    x = torch.randn((n_samples, *shp), generator=rng, device=device, dtype=dtype)
    h = 1.0 / n_steps
    for k in range(n_steps):
        t = k * h
        g = dps_guidance(velocity, log_lik, x, t)
        with torch.no_grad():
            tt = torch.full((n_samples,), t, dtype=x.dtype, device=x.device)
            x = x + h * (velocity(x, tt) + scale * g)
    return x.detach()


@dataclass
class SIRResult:
    """Output of :func:`sir_sample`.

    Attributes:
        x: Resampled data samples ``(n_samples, ...)``.
        z: Their source samples.
        weights: Normalised importance weights of all proposals ``(n_proposals,)``.
        n_eff: ``1 / sum(w^2)``, the effective number of proposals.
        n_evaluations: Generator evaluations (= ``n_proposals``).
    """

    x: torch.Tensor
    z: torch.Tensor
    weights: torch.Tensor
    n_eff: float
    n_evaluations: int


def sir_sample(
    generator: Callable[[torch.Tensor], torch.Tensor],
    log_lik: LogLik,
    source_shape: tuple[int, ...] | int,
    n_proposals: int,
    n_samples: int,
    *,
    rng: torch.Generator | None = None,
    seed: int | None = None,
    batch_size: int = 8192,
    dtype: torch.dtype = torch.float32,
) -> SIRResult:
    """Sampling-importance-resampling with prior proposals ``z ~ N(0, I)``.

    Weights ``w_i ∝ g(y | T(z_i))`` (self-normalised), then multinomial resampling. Exact as
    ``n_proposals -> inf``; the benchmark uses it with 200 000 proposals as the reference.

    Raises:
        ValueError: For invalid sizes, or if every proposal has zero likelihood.
    """
    shp = _shape(source_shape)
    _positive_int("n_proposals", n_proposals)
    _positive_int("n_samples", n_samples)
    _positive_int("batch_size", batch_size)
    g = _rng(rng, seed)
    zs, xs, lls = [], [], []
    done = 0
    while done < n_proposals:
        b = min(batch_size, n_proposals - done)
        z = torch.randn((b, *shp), generator=g, dtype=dtype)
        with torch.no_grad():
            x = generator(z)
            ll = torch.as_tensor(log_lik(x)).to(torch.float64).reshape(b)
        if bool(torch.isnan(ll).any()):
            raise ValueError("log_lik returned NaN")
        zs.append(z)
        xs.append(x.clone())
        lls.append(ll)
        done += b
    ll = torch.cat(lls)
    if bool(torch.isinf(ll).all()) and bool((ll < 0).all()):
        raise ValueError("every proposal has log-likelihood -inf; SIR cannot resample")
    w = torch.softmax(ll, dim=0)
    idx = torch.multinomial(w, n_samples, replacement=True, generator=g)
    x_all, z_all = torch.cat(xs), torch.cat(zs)
    return SIRResult(
        x=x_all[idx],
        z=z_all[idx],
        weights=w,
        n_eff=float(1.0 / (w**2).sum()),
        n_evaluations=n_proposals,
    )


@dataclass
class PCNResult:
    """Output of :func:`pcn_sample`: kept states ``(n_kept, n_chains, ...)`` and statistics."""

    z: torch.Tensor
    x: torch.Tensor
    log_lik: torch.Tensor
    acceptance_rate: float
    n_evaluations: int

    def flat_x(self) -> torch.Tensor:
        """All kept data samples as one batch."""
        return self.x.reshape(-1, *self.x.shape[2:])


def pcn_sample(
    generator: Callable[[torch.Tensor], torch.Tensor],
    log_lik: Callable[..., torch.Tensor],
    source_shape: tuple[int, ...] | int,
    n_chains: int,
    n_iter: int,
    beta: float,
    *,
    burn_in: int = 0,
    rng: torch.Generator | None = None,
    seed: int | None = None,
    chain_indexed: bool = False,
    dtype: torch.dtype = torch.float32,
    progress: bool | None = None,
) -> PCNResult:
    r"""Preconditioned Crank-Nicolson Metropolis on the Gaussian source.

    .. math:: z' = \sqrt{1 - \beta^2}\, z + \beta \nu,\ \nu \sim N(0, I), \qquad
              \text{accept with } \min(1, g(y \mid T(z')) / g(y \mid T(z)))

    The proposal is reversible with respect to ``N(0, I)``, so only the likelihood ratio
    enters. One generator evaluation per chain and iteration (plus one for the start).
    ``progress`` shows a bar over the iterations: ``None`` (default) on a terminal only,
    ``True`` always, ``False`` never.

    Raises:
        ValueError: For invalid sizes or ``beta`` outside ``[0, 1]``.
    """
    shp = _shape(source_shape)
    _positive_int("n_chains", n_chains)
    _positive_int("n_iter", n_iter)
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    if not 0 <= burn_in < n_iter:
        raise ValueError(f"burn_in must be in [0, n_iter), got {burn_in}")
    g = _rng(rng, seed)
    idx = torch.arange(n_chains)

    def ell_of(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            x = generator(z).clone()
            ll = log_lik(x, idx) if chain_indexed else log_lik(x)
        return torch.as_tensor(ll).to(torch.float64).reshape(n_chains), x

    z = torch.randn((n_chains, *shp), generator=g, dtype=dtype)
    ell, x = ell_of(z)
    n_eval = n_chains
    a = math.sqrt(1.0 - beta**2)
    zs, xs, ls = [], [], []
    n_acc = 0
    for it in show_progress(range(n_iter), enabled=progress, desc="pCN", total=n_iter):
        nu = torch.randn(z.shape, generator=g, dtype=dtype)
        z_prop = a * z + beta * nu
        ell_prop, x_prop = ell_of(z_prop)
        n_eval += n_chains
        log_u = torch.log(torch.rand(n_chains, generator=g, dtype=torch.float64))
        with torch.no_grad():
            diff = torch.nan_to_num(ell_prop - ell, nan=-math.inf)
        acc = log_u < diff
        n_acc += int(acc.sum())
        bshape = (n_chains,) + (1,) * (z.ndim - 1)
        z = torch.where(acc.view(bshape), z_prop, z)
        x = torch.where(acc.view((n_chains,) + (1,) * (x.ndim - 1)), x_prop, x)
        ell = torch.where(acc, ell_prop, ell)
        if it >= burn_in:
            zs.append(z.clone())
            xs.append(x.clone())
            ls.append(ell.clone())
    return PCNResult(
        z=torch.stack(zs),
        x=torch.stack(xs),
        log_lik=torch.stack(ls),
        acceptance_rate=n_acc / (n_chains * n_iter),
        n_evaluations=n_eval,
    )
