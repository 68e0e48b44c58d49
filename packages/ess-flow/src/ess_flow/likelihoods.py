"""Log-likelihood callables ``x (batch, ...) -> log g(y | x)`` of shape ``(batch,)``.

All of them are plain forward computations; none needs a gradient, so they may be
quantized, thresholded or wrap a black-box simulator. ``-inf`` marks impossible samples.
Torch tensors in, torch tensors out; they follow the input's device and dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

__all__ = [
    "ContactLikelihood",
    "DistanceLikelihood",
    "GaussianLikelihood",
    "IndicatorLikelihood",
    "PropertyTargetLikelihood",
    "QuantizedGaussianLikelihood",
    "SumLikelihood",
    "Tempered",
]

ForwardOp = Callable[[torch.Tensor], torch.Tensor]


def _positive(name: str, value: float | torch.Tensor) -> torch.Tensor:
    t = torch.as_tensor(value, dtype=torch.float64)
    if not bool((t > 0).all()) or not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return t


def _gauss(pred: torch.Tensor, y: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """Sum over non-batch dims of ``log N(y; pred, sigma^2)`` (normalised)."""
    y = y.to(device=pred.device, dtype=pred.dtype)
    s = sigma.to(device=pred.device, dtype=pred.dtype)
    r = ((pred - y) / s) ** 2 + 2 * torch.log(s) + math.log(2 * math.pi)
    if r.shape[0] != pred.shape[0]:
        raise ValueError(
            f"observation of shape {tuple(y.shape)} does not broadcast to predictions "
            f"of shape {tuple(pred.shape)}"
        )
    return -0.5 * r.reshape(pred.shape[0], -1).sum(1)


class GaussianLikelihood:
    """``log N(y; A(x), sigma^2 I)`` with ``A = forward_op`` (identity if None).

    Args:
        forward_op: Callable ``x -> A(x)`` (batch first), or None for the identity.
        y: Observation, broadcastable to ``A(x)[0]`` (or per-sample ``(batch, ...)``).
        sigma: Noise standard deviation (> 0; scalar or broadcastable).

    Example:
        >>> import torch
        >>> lik = GaussianLikelihood(None, torch.zeros(2), 1.0)
        >>> lik(torch.zeros(3, 2)).shape
        torch.Size([3])
    """

    def __init__(
        self, forward_op: ForwardOp | None, y: torch.Tensor | float, sigma: float | torch.Tensor
    ) -> None:
        if forward_op is not None and not callable(forward_op):
            raise TypeError(f"forward_op must be callable or None, got {type(forward_op).__name__}")
        self.forward_op = forward_op
        self.y: torch.Tensor = torch.as_tensor(y)
        self.sigma: torch.Tensor = _positive("sigma", sigma)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``log g(y | x)`` per sample."""
        pred = x if self.forward_op is None else self.forward_op(x)
        return _gauss(pred, self.y, self.sigma)


class PropertyTargetLikelihood(GaussianLikelihood):
    """Gaussian soft target on simulated properties: ``log N(target; property_fn(x), sigma^2)``.

    ``property_fn`` may be any forward-only simulator returning ``(batch, n_props)``.
    """

    def __init__(
        self, property_fn: ForwardOp, target: torch.Tensor | float, sigma: float | torch.Tensor
    ) -> None:
        if not callable(property_fn):
            raise TypeError(f"property_fn must be callable, got {type(property_fn).__name__}")
        super().__init__(property_fn, target, sigma)


class QuantizedGaussianLikelihood:
    """Gaussian noise on a quantized observation: ``y ~ N(round(A(x) / step) * step, sigma^2)``.

    The quantizer has zero gradient almost everywhere, so gradient-guided samplers get no
    signal; ESS only needs its forward value.

    Args:
        forward_op: Callable ``x -> A(x)`` or None (identity).
        y: Observed (quantized) value.
        sigma: Noise standard deviation (> 0).
        step: Quantization step (> 0).
    """

    def __init__(
        self,
        forward_op: ForwardOp | None,
        y: torch.Tensor | float,
        sigma: float | torch.Tensor,
        step: float,
    ) -> None:
        if forward_op is not None and not callable(forward_op):
            raise TypeError(f"forward_op must be callable or None, got {type(forward_op).__name__}")
        self.forward_op = forward_op
        self.y: torch.Tensor = torch.as_tensor(y)
        self.sigma: torch.Tensor = _positive("sigma", sigma)
        self.step: float = float(_positive("step", step))

    def quantize(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``round(A(x) / step) * step``."""
        pred = x if self.forward_op is None else self.forward_op(x)
        return torch.round(pred / self.step) * self.step

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``log g(y | x)`` per sample."""
        return _gauss(self.quantize(x), self.y, self.sigma)


class IndicatorLikelihood:
    """Hard constraint: ``0`` where ``predicate(x)`` holds, ``-inf`` elsewhere.

    Use ``init="search"`` with :class:`~ess_flow.ESSFlow` so that chains start inside.
    """

    def __init__(self, predicate: Callable[[torch.Tensor], torch.Tensor]) -> None:
        if not callable(predicate):
            raise TypeError(f"predicate must be callable, got {type(predicate).__name__}")
        self.predicate = predicate

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Return 0 or ``-inf`` per sample."""
        ok = torch.as_tensor(self.predicate(x), device=x.device).reshape(x.shape[0]).bool()
        dtype = x.dtype if x.is_floating_point() else torch.float32
        zero = torch.zeros(x.shape[0], device=x.device, dtype=dtype)
        return torch.where(ok, zero, torch.full_like(zero, -math.inf))


def _pairs(pairs: Sequence[tuple[int, int]] | torch.Tensor) -> torch.Tensor:
    p = torch.as_tensor(pairs, dtype=torch.long)
    if p.ndim not in (2, 3) or p.shape[-1] != 2:
        raise ValueError(
            f"pairs must have shape (n_pairs, 2) or (batch, n_pairs, 2), got {tuple(p.shape)}"
        )
    return p


def _pair_distances(x: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    pts = x.reshape(x.shape[0], -1, 3)
    p = pairs.to(x.device)
    if p.ndim == 2:
        return torch.linalg.vector_norm(pts[:, p[:, 0]] - pts[:, p[:, 1]], dim=-1)
    # Per-sample pairs (batch, n_pairs, 2): gather the two end points of every pair.
    ia = p[..., 0, None].expand(-1, -1, 3)
    ib = p[..., 1, None].expand(-1, -1, 3)
    return torch.linalg.vector_norm(pts.gather(1, ia) - pts.gather(1, ib), dim=-1)


class DistanceLikelihood:
    """Noisy pairwise distances: ``d_obs[k] ~ N(|x_i - x_j|, sigma^2)`` for ``(i, j) = pairs[k]``.

    ``x`` is ``(batch, n_points, 3)`` or flat ``(batch, 3 * n_points)``; ``pairs`` is
    ``(n_pairs, 2)`` or per sample ``(batch, n_pairs, 2)``; ``d_obs`` is ``(n_pairs,)`` or per
    sample ``(batch, n_pairs)``.
    """

    def __init__(
        self,
        pairs: Sequence[tuple[int, int]] | torch.Tensor,
        d_obs: torch.Tensor,
        sigma: float | torch.Tensor,
    ) -> None:
        self.pairs: torch.Tensor = _pairs(pairs)
        self.d_obs: torch.Tensor = torch.as_tensor(d_obs)
        n_pairs = self.pairs.shape[-2]
        if self.d_obs.shape[-1] != n_pairs:
            raise ValueError(f"d_obs must end in n_pairs={n_pairs}, got {tuple(self.d_obs.shape)}")
        self.sigma: torch.Tensor = _positive("sigma", sigma)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``log g(d_obs | x)`` per sample."""
        return _gauss(_pair_distances(x, self.pairs), self.d_obs, self.sigma)


class ContactLikelihood:
    """Binary contacts ``c_k = [|x_i - x_j| < threshold]`` observed with flip probability ``p``.

    ``log g = sum_k log((1 - p) if contact_k(x) == c_k else p)``; a step function of ``x``,
    so it carries no gradient.
    """

    def __init__(
        self,
        pairs: Sequence[tuple[int, int]] | torch.Tensor,
        contacts: torch.Tensor,
        threshold: float,
        flip_prob: float,
    ) -> None:
        self.pairs: torch.Tensor = _pairs(pairs)
        self.contacts: torch.Tensor = torch.as_tensor(contacts).bool()
        n_pairs = self.pairs.shape[-2]
        if self.contacts.shape[-1] != n_pairs:
            raise ValueError(
                f"contacts must end in n_pairs={n_pairs}, got {tuple(self.contacts.shape)}"
            )
        if not 0.0 < flip_prob < 0.5:
            raise ValueError(f"flip_prob must be in (0, 0.5), got {flip_prob}")
        self.threshold: float = float(_positive("threshold", threshold))
        self.flip_prob: float = float(flip_prob)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``log g(contacts | x)`` per sample."""
        c = _pair_distances(x, self.pairs) < self.threshold
        agree = c == self.contacts.to(x.device)
        lp = torch.where(
            agree,
            torch.tensor(math.log1p(-self.flip_prob), dtype=x.dtype, device=x.device),
            torch.tensor(math.log(self.flip_prob), dtype=x.dtype, device=x.device),
        )
        return lp.sum(-1)


class SumLikelihood:
    """Product of independent observations: the sum of the terms' log-likelihoods."""

    def __init__(self, *terms: Callable[[torch.Tensor], torch.Tensor]) -> None:
        if not terms:
            raise ValueError("SumLikelihood needs at least one term")
        for t in terms:
            if not callable(t):
                raise TypeError(f"every term must be callable, got {type(t).__name__}")
        self.terms = terms

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Return the summed log-likelihood per sample."""
        out = self.terms[0](x)
        for t in self.terms[1:]:
            out = out + t(x)
        return out


class Tempered:
    """``beta * log_likelihood(x)`` (a flattened likelihood, ``0 < beta``)."""

    def __init__(self, log_likelihood: Callable[[torch.Tensor], torch.Tensor], beta: float) -> None:
        if not callable(log_likelihood):
            raise TypeError("log_likelihood must be callable")
        if not beta > 0:
            raise ValueError(f"beta must be > 0, got {beta}")
        self.log_likelihood = log_likelihood
        self.beta: float = float(beta)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Return the tempered log-likelihood per sample."""
        return self.beta * self.log_likelihood(x)
