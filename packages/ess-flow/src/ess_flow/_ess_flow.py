"""ESS-Flow: elliptical slice sampling on the Gaussian source of a deterministic generator.

This module mirrors the algorithm box (spec, "The method"): the batched elliptical slice
kernel :func:`elliptical_slice_step` on whitened states, and :class:`ESSFlow`, which wraps the
generator, the likelihood, a Gaussian source ``N(mu, L L^T)``, initialisation, optional
tempering and the multi-fidelity warm-up.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ess_flow.diagnostics import effective_sample_size, rhat
from methodkit.torch import generator as seeded_generator

__all__ = ["ESSFlow", "ESSFlowResult", "elliptical_slice_step"]

logger = logging.getLogger(__name__)

KernelFn = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, "torch.Tensor | None"]]


def _ess_kernel(
    w: torch.Tensor,
    ell_w: torch.Tensor,
    aux: torch.Tensor | None,
    fn: KernelFn,
    generator: torch.Generator | None,
    max_shrink: int,
    trace: list[dict[str, torch.Tensor]] | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, int, int]:
    """One ESS transition for every chain; ``fn(prop, chain_idx)`` returns ``(ell, aux)``."""
    B = w.shape[0]
    dev, dt = w.device, w.dtype
    bshape = (B,) + (1,) * (w.ndim - 1)
    # Step 2 of the algorithm box: auxiliary ellipse, slice height, initial angle and bracket.
    nu = torch.randn(w.shape, generator=generator, device=dev, dtype=dt)
    u = torch.rand(B, generator=generator, device=dev, dtype=dt)
    h = ell_w + torch.log(u)
    theta = torch.rand(B, generator=generator, device=dev, dtype=dt) * (2 * math.pi)
    theta_min = theta - 2 * math.pi
    theta_max = theta.clone()
    w_new, ell_new = w.clone(), ell_w.clone()
    aux_new = None if aux is None else aux.clone()
    active = torch.ones(B, dtype=torch.bool, device=dev)
    n_calls = 0
    for _ in range(max_shrink):
        idx = active.nonzero(as_tuple=True)[0]
        th = theta[idx].view((-1, *bshape[1:]))
        prop = w[idx] * torch.cos(th) + nu[idx] * torch.sin(th)
        ell_prop, aux_prop = fn(prop, idx)
        n_calls += 1
        acc = ell_prop > h[idx]
        if trace is not None:
            trace.append(
                {
                    "index": idx.clone(),
                    "theta": theta[idx].clone(),
                    "theta_min": theta_min[idx].clone(),
                    "theta_max": theta_max[idx].clone(),
                    "w": w[idx].clone(),
                    "nu": nu[idx].clone(),
                    "h": h[idx].clone(),
                    "proposal": prop.clone(),
                    "ell": ell_prop.clone(),
                    "accepted": acc.clone(),
                }
            )
        acc_idx = idx[acc]
        w_new[acc_idx] = prop[acc]
        ell_new[acc_idx] = ell_prop[acc]
        if aux_new is not None and aux_prop is not None:
            aux_new[acc_idx] = aux_prop[acc].to(aux_new.dtype)
        active[acc_idx] = False
        # Shrink the bracket towards theta = 0 (where the proposal equals the current state).
        rej = idx[~acc]
        if rej.numel() == 0:
            break
        t_rej = theta[rej]
        neg = t_rej < 0
        theta_min[rej] = torch.where(neg, t_rej, theta_min[rej])
        theta_max[rej] = torch.where(neg, theta_max[rej], t_rej)
        # Draw for every chain so the random stream does not depend on which chains finished.
        r = torch.rand(B, generator=generator, device=dev, dtype=dt)
        theta = torch.where(active, theta_min + r * (theta_max - theta_min), theta)
    n_unfinished = int(active.sum())
    return w_new, ell_new, aux_new, n_calls, n_unfinished


def elliptical_slice_step(
    w: torch.Tensor,
    ell_w: torch.Tensor,
    log_lik_of_w: Callable[[torch.Tensor], torch.Tensor],
    *,
    generator: torch.Generator | None = None,
    max_shrink: int = 200,
    trace: list[dict[str, torch.Tensor]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, int]:
    r"""One batched elliptical slice sampling transition (Murray, Adams & MacKay 2010).

    For each chain (row of ``w``), with target ``pi(w) ∝ exp(ell(w)) N(w; 0, I)``:

    .. math::

        \nu \sim N(0, I),\quad h = \ell(w) + \log u,\ u \sim U(0,1),\quad
        \theta \sim U(0, 2\pi),\ [\theta_{min}, \theta_{max}] = [\theta - 2\pi, \theta]

    then repeat ``w' = w cos(theta) + nu sin(theta)``; accept if ``ell(w') > h``, otherwise
    shrink the bracket towards 0 and redraw ``theta`` inside it. Chains still searching are
    evaluated together: each round is one batched call of ``log_lik_of_w``.

    Args:
        w: Whitened states, shape ``(n_chains, ...)``.
        ell_w: ``ell(w)``, shape ``(n_chains,)``.
        log_lik_of_w: Batched log-likelihood of whitened states (may return ``-inf``).
        generator: ``torch.Generator`` for all randomness.
        max_shrink: Maximum number of rounds; chains not done by then keep their state and a
            ``RuntimeWarning`` is issued (a slight bias).
        trace: If a list is given, one dict per round is appended (index, theta, bracket,
            proposals, slice heights, acceptances) for inspection and tests.

    Returns:
        ``(w_new, ell_new, n_calls)`` where ``n_calls`` is the number of batched calls.

    Raises:
        ValueError: If shapes are inconsistent or ``max_shrink < 1``.
    """
    if max_shrink < 1:
        raise ValueError(f"max_shrink must be >= 1, got {max_shrink}")
    if ell_w.shape != (w.shape[0],):
        raise ValueError(f"ell_w must have shape ({w.shape[0]},), got {tuple(ell_w.shape)}")

    def fn(x: torch.Tensor, _idx: torch.Tensor) -> tuple[torch.Tensor, None]:
        return log_lik_of_w(x), None

    w_new, ell_new, _, n_calls, n_unfinished = _ess_kernel(
        w, ell_w, None, fn, generator, max_shrink, trace
    )
    if n_unfinished:
        warnings.warn(
            f"{n_unfinished} chain(s) reached max_shrink={max_shrink}; their state is kept",
            RuntimeWarning,
            stacklevel=2,
        )
    return w_new, ell_new, n_calls


@dataclass
class ESSFlowResult:
    """Samples and diagnostics of :meth:`ESSFlow.run`.

    Attributes:
        z: Source samples, ``(n_kept, n_chains, *source_shape)``.
        x: Generated samples ``T(z)``, ``(n_kept, n_chains, *data_shape)``, or None.
        log_lik: ``log g(y | x)`` of the kept samples, ``(n_kept, n_chains)``.
        n_generator_calls: Total number of batched generator calls (init + every round).
        n_evaluations: Total number of single-sample generator evaluations (sum of batch sizes).
        calls_per_iter: Batched calls per iteration (``1 + shrinks`` of the slowest chain),
            shape ``(n_total_iter,)``, warm-up iterations included.
        n_max_shrink: Number of chain-iterations that hit ``max_shrink``.
        warmup_iters: Number of warm-up iterations (tempering / low fidelity) before ``n_iter``.
    """

    z: torch.Tensor
    x: torch.Tensor | None
    log_lik: torch.Tensor
    n_generator_calls: int
    n_evaluations: int
    calls_per_iter: torch.Tensor
    n_max_shrink: int = 0
    warmup_iters: int = 0
    extras: dict[str, Any] = field(default_factory=dict)

    def flat_x(self) -> torch.Tensor:
        """All kept generated samples as one batch ``(n_kept * n_chains, *data_shape)``.

        Raises:
            ValueError: If the run used ``return_x=False``.
        """
        if self.x is None:
            raise ValueError("no x stored: run with return_x=True")
        return self.x.reshape(-1, *self.x.shape[2:])

    def flat_z(self) -> torch.Tensor:
        """All kept source samples as one batch ``(n_kept * n_chains, *source_shape)``."""
        return self.z.reshape(-1, *self.z.shape[2:])

    def summary(self) -> dict[str, float]:
        """Return scalar diagnostics: split-R-hat, ``n_eff`` over source coordinates, cost."""
        zz = self.z.reshape(self.z.shape[0], self.z.shape[1], -1).double().cpu().numpy()
        out: dict[str, float] = {
            "n_kept": float(self.z.shape[0]),
            "n_chains": float(self.z.shape[1]),
            "n_generator_calls": float(self.n_generator_calls),
            "n_evaluations": float(self.n_evaluations),
            "mean_calls_per_iter": float(self.calls_per_iter.double().mean()),
            "n_max_shrink": float(self.n_max_shrink),
        }
        if zz.shape[0] >= 4:
            r = rhat(zz)
            ne = effective_sample_size(zz)
            out.update(
                rhat_max=float(r.max()), n_eff_min=float(ne.min()), n_eff_mean=float(ne.mean())
            )
        return out


class ESSFlow:
    r"""Gradient-free posterior sampling in the source space of a flow generator.

    Target on the source ``z ~ N(mu, L L^T)`` of a deterministic generator ``T``:

    .. math::

        \pi(z) \propto g(y \mid T(z))\, N(z; \mu, L L^T), \qquad z = \mu + L w,

    sampled with elliptical slice sampling on the whitened ``w`` (see
    :func:`elliptical_slice_step`). If ``z ~ pi`` then ``x = T(z)`` follows the posterior
    ``p(x | y) ∝ g(y | x) p_T(x)`` under the model's own prior: no Jacobian is needed, and only
    forward passes of ``T`` and ``g`` are made (the likelihood may be quantized, thresholded or a
    black-box simulator). All chains advance together as one batch.

    Args:
        generator: Callable ``T: z (batch, *source_shape) -> x (batch, ...)`` such as a
            :class:`~ess_flow.FlowGenerator`.
        log_likelihood: Callable ``x -> log g(y | x)`` of shape ``(batch,)``; ``-inf`` allowed,
            NaN forbidden. With ``chain_indexed=True`` it is called as
            ``log_likelihood(x, chain_index)`` so that each chain may have its own observation.
        source_shape: Shape of one source sample.
        prior_mean: Optional ``mu`` of shape ``source_shape`` (default 0).
        prior_scale_tril: Optional lower-triangular ``L`` of shape ``(D, D)``,
            ``D = prod(source_shape)``, with positive diagonal (default identity).
        low_fidelity_generator: Optional cheap generator on the same source space used for the
            warm-up iterations (multi-fidelity, *inferred scheme*).
        max_shrink: Maximum shrink rounds per iteration.
        chain_indexed: See ``log_likelihood``.
        device: Device of the chains (default: CPU).
        dtype: Floating dtype of the chains.

    Raises:
        TypeError: If ``generator`` or ``log_likelihood`` is not callable.
        ValueError: For an invalid ``source_shape``, ``prior_mean``, ``prior_scale_tril`` or
            ``max_shrink``.

    References:
        ESS-Flow: gradient-free posterior sampling for flow-matching generators (NeurIPS 2026
        submission). Murray, Adams & MacKay, "Elliptical slice sampling", AISTATS 2010.

    Example:
        >>> import torch
        >>> from ess_flow import ESSFlow, GaussianLikelihood
        >>> sampler = ESSFlow(lambda z: 2 * z, GaussianLikelihood(None, torch.ones(2), 0.5), (2,))
        >>> res = sampler.run(n_chains=8, n_iter=20, seed=0)
        >>> res.z.shape
        torch.Size([20, 8, 2])
    """

    def __init__(
        self,
        generator: Callable[[torch.Tensor], torch.Tensor],
        log_likelihood: Callable[..., torch.Tensor],
        source_shape: tuple[int, ...] | int,
        *,
        prior_mean: torch.Tensor | None = None,
        prior_scale_tril: torch.Tensor | None = None,
        low_fidelity_generator: Callable[[torch.Tensor], torch.Tensor] | None = None,
        max_shrink: int = 200,
        chain_indexed: bool = False,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if not callable(generator):
            raise TypeError(f"generator must be callable, got {type(generator).__name__}")
        if not callable(log_likelihood):
            raise TypeError(f"log_likelihood must be callable, got {type(log_likelihood).__name__}")
        if low_fidelity_generator is not None and not callable(low_fidelity_generator):
            raise TypeError("low_fidelity_generator must be callable or None")
        if isinstance(source_shape, int):
            source_shape = (source_shape,)
        source_shape = tuple(source_shape)
        if not source_shape or any(not isinstance(s, int) or s < 1 for s in source_shape):
            raise ValueError(f"source_shape must be a tuple of positive ints, got {source_shape!r}")
        if max_shrink < 1:
            raise ValueError(f"max_shrink must be >= 1, got {max_shrink}")
        self.generator = generator
        self.log_likelihood = log_likelihood
        self.source_shape: tuple[int, ...] = source_shape
        self.low_fidelity_generator = low_fidelity_generator
        self.max_shrink: int = int(max_shrink)
        self.chain_indexed: bool = bool(chain_indexed)
        self.device: torch.device = (
            torch.device(device) if device is not None else torch.device("cpu")
        )
        self.dtype: torch.dtype = dtype
        D = math.prod(source_shape)
        self.prior_mean: torch.Tensor | None = None
        if prior_mean is not None:
            mu = torch.as_tensor(prior_mean, device=self.device, dtype=dtype)
            if mu.numel() != D:
                raise ValueError(
                    f"prior_mean must have {D} elements (source_shape {source_shape}), "
                    f"got shape {tuple(mu.shape)}"
                )
            self.prior_mean = mu.reshape(source_shape)
        self.prior_scale_tril: torch.Tensor | None = None
        if prior_scale_tril is not None:
            L = torch.as_tensor(prior_scale_tril, device=self.device, dtype=dtype)
            if L.ndim != 2 or L.shape[0] != L.shape[1]:
                raise ValueError(f"prior_scale_tril must be square, got shape {tuple(L.shape)}")
            if L.shape[0] != D:
                raise ValueError(f"prior_scale_tril must be ({D}, {D}), got {tuple(L.shape)}")
            if not torch.equal(L, torch.tril(L)):
                raise ValueError("prior_scale_tril must be lower-triangular")
            if not bool((torch.diagonal(L) > 0).all()):
                raise ValueError("prior_scale_tril must have a positive diagonal")
            self.prior_scale_tril = L

    # -- source-space transforms -------------------------------------------------------------
    def to_source(self, w: torch.Tensor) -> torch.Tensor:
        """Map whitened states ``w`` to source samples ``z = mu + L w``."""
        z = w
        if self.prior_scale_tril is not None:
            flat = w.reshape(w.shape[0], -1)
            z = (flat @ self.prior_scale_tril.T).reshape(w.shape)
        if self.prior_mean is not None:
            z = z + self.prior_mean
        return z

    def to_whitened(self, z: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`to_source`: ``w = L^{-1} (z - mu)``."""
        w = z
        if self.prior_mean is not None:
            w = w - self.prior_mean
        if self.prior_scale_tril is not None:
            flat = w.reshape(w.shape[0], -1)
            sol = torch.linalg.solve_triangular(self.prior_scale_tril, flat.T, upper=False)
            w = sol.T.reshape(w.shape)
        return w

    # -- evaluation --------------------------------------------------------------------------
    def _evaluate(
        self,
        w: torch.Tensor,
        idx: torch.Tensor,
        gen: Callable[[torch.Tensor], torch.Tensor],
        counter: list[int],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(ell(T(z(w))), T(z(w)))`` for chains ``idx``, with input validation."""
        z = self.to_source(w)
        with torch.no_grad():
            x = gen(z)
            counter[0] += 1
            counter[1] += int(w.shape[0])
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"generator must return a torch.Tensor, got {type(x).__name__}")
            if x.shape[0] != w.shape[0]:
                raise ValueError(
                    f"generator returned batch {x.shape[0]} for an input batch of {w.shape[0]}"
                )
            if x.is_floating_point() and not bool(torch.isfinite(x).all()):
                bad = (~torch.isfinite(x.reshape(x.shape[0], -1))).any(1)
                raise ValueError(
                    f"generator output is non-finite for chains {idx[bad].tolist()[:10]}"
                )
            ell = self.log_likelihood(x, idx) if self.chain_indexed else self.log_likelihood(x)
        ell = torch.as_tensor(ell, device=w.device).to(w.dtype)
        if ell.shape != (w.shape[0],):
            raise ValueError(
                f"log_likelihood must return shape ({w.shape[0]},), got {tuple(ell.shape)}"
            )
        nan = torch.isnan(ell)
        if bool(nan.any()):
            raise ValueError(f"log_likelihood returned NaN for chains {idx[nan].tolist()[:10]}")
        if bool((ell == math.inf).any()):
            raise ValueError("log_likelihood returned +inf")
        return ell, x

    def _init(
        self,
        n_chains: int,
        init: str | torch.Tensor,
        rng: torch.Generator,
        gen: Callable[[torch.Tensor], torch.Tensor],
        counter: list[int],
        max_init_tries: int,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        shape = (n_chains, *self.source_shape)
        all_idx = torch.arange(n_chains, device=self.device)
        if isinstance(init, torch.Tensor):
            if tuple(init.shape) != shape:
                raise ValueError(
                    f"init tensor must have shape (n_chains, *source_shape) = {shape}, "
                    f"got {tuple(init.shape)}"
                )
            w = self.to_whitened(init.to(device=self.device, dtype=self.dtype))
            ell, x = self._evaluate(w, all_idx, gen, counter)
            if bool(torch.isinf(ell).all()):
                raise ValueError("every chain of the init tensor has log-likelihood -inf")
            return w, ell, x
        if init not in ("prior", "search"):
            raise ValueError(f"init must be 'prior', 'search' or a tensor, got {init!r}")
        w = torch.randn(shape, generator=rng, device=self.device, dtype=self.dtype)
        ell, x = self._evaluate(w, all_idx, gen, counter)
        bad = torch.isinf(ell)
        if init == "prior":
            if bool(bad.all()):
                raise ValueError(
                    "every chain starts with log-likelihood -inf under init='prior'; use "
                    "init='search' (redraws prior samples until finite) or anneal_iters > 0"
                )
            if bool(bad.any()):
                warnings.warn(
                    f"{int(bad.sum())} chain(s) start at log-likelihood -inf; redrawing them "
                    "from the prior as with init='search'",
                    RuntimeWarning,
                    stacklevel=3,
                )
        x = x.clone()
        tries = 1
        while bool(bad.any()):
            if tries >= max_init_tries:
                raise RuntimeError(
                    f"init='search' found no finite log-likelihood for {int(bad.sum())} chain(s) "
                    f"after max_init_tries={max_init_tries} prior draws"
                )
            idx = bad.nonzero(as_tuple=True)[0]
            w_try = torch.randn(
                (idx.numel(), *self.source_shape),
                generator=rng,
                device=self.device,
                dtype=self.dtype,
            )
            ell_try, x_try = self._evaluate(w_try, idx, gen, counter)
            ok = torch.isfinite(ell_try)
            w[idx[ok]] = w_try[ok]
            ell[idx[ok]] = ell_try[ok]
            x[idx[ok]] = x_try[ok].to(x.dtype)
            bad[idx[ok]] = False
            tries += 1
        return w, ell, x

    # -- main loop ---------------------------------------------------------------------------
    def run(
        self,
        n_chains: int,
        n_iter: int,
        *,
        burn_in: int = 0,
        thin: int = 1,
        init: str | torch.Tensor = "prior",
        anneal_iters: int = 0,
        low_fidelity_iters: int = 0,
        seed: int | None = None,
        generator: torch.Generator | None = None,
        return_x: bool = True,
        max_init_tries: int = 1000,
        callback: Callable[[int, torch.Tensor, torch.Tensor], None] | None = None,
        progress: bool = False,
    ) -> ESSFlowResult:
        """Run ``n_chains`` chains for ``n_iter`` iterations after optional warm-up.

        Warm-up: ``anneal_iters + low_fidelity_iters`` iterations run first and are never
        returned. During the first ``anneal_iters`` of them the likelihood is tempered by
        ``beta_k = (k + 1) / (anneal_iters + 1)``; if ``low_fidelity_iters > 0`` all warm-up
        iterations use ``low_fidelity_generator``, and the state is then re-evaluated with
        the main generator (one call). The ``n_iter`` main iterations follow; of those, the
        first ``burn_in`` are dropped and every ``thin``-th is kept.

        Args:
            n_chains: Number of parallel chains (>= 1).
            n_iter: Main iterations (>= 1).
            burn_in: Main iterations discarded (``0 <= burn_in < n_iter``).
            thin: Keep every ``thin``-th iteration (>= 1).
            init: ``"prior"``, ``"search"`` or a tensor ``(n_chains, *source_shape)`` of ``z``.
            anneal_iters: Tempered warm-up iterations (>= 0).
            low_fidelity_iters: Warm-up iterations on the low-fidelity generator (>= 0).
            seed: Seed for a fresh ``torch.Generator`` (ignored if ``generator`` is given).
            generator: ``torch.Generator`` for all randomness (on the chains' device).
            return_x: Store ``x = T(z)`` of the kept samples.
            max_init_tries: Prior redraws per chain for ``init="search"``.
            callback: Called as ``callback(iteration, z, log_lik)`` after every iteration.
            progress: Show a progress bar.

        Returns:
            An :class:`ESSFlowResult`.

        Raises:
            ValueError: For invalid arguments, NaN / wrong-shape likelihoods, non-finite
                generator output, or all chains at ``-inf`` under ``init="prior"``.
            RuntimeError: If ``init="search"`` exhausts ``max_init_tries``.
        """
        for name, val, lo in (
            ("n_chains", n_chains, 1),
            ("n_iter", n_iter, 1),
            ("thin", thin, 1),
            ("burn_in", burn_in, 0),
            ("anneal_iters", anneal_iters, 0),
            ("low_fidelity_iters", low_fidelity_iters, 0),
            ("max_init_tries", max_init_tries, 1),
        ):
            if isinstance(val, bool) or not isinstance(val, int) or val < lo:
                raise ValueError(f"{name} must be an int >= {lo}, got {val!r}")
        if burn_in >= n_iter:
            raise ValueError(f"burn_in must be < n_iter={n_iter}, got {burn_in}")
        if low_fidelity_iters > 0 and self.low_fidelity_generator is None:
            raise ValueError("low_fidelity_iters > 0 needs a low_fidelity_generator")
        if generator is None:
            generator = seeded_generator(None if seed is None else int(seed), device=self.device)

        from methodkit import progress as _progress

        counter = [0, 0]
        n_warm = anneal_iters + low_fidelity_iters
        warm_gen = self.generator
        if low_fidelity_iters > 0 and self.low_fidelity_generator is not None:
            warm_gen = self.low_fidelity_generator
        first_gen = warm_gen if n_warm > 0 else self.generator
        w, ell, x = self._init(n_chains, init, generator, first_gen, counter, max_init_tries)
        calls_per_iter: list[int] = []
        kept_z, kept_x, kept_ell = [], [], []
        n_max_shrink = 0
        total = n_warm + n_iter
        for it in _progress(range(total), progress, desc="ESS-Flow", total=total):
            if it == n_warm and low_fidelity_iters > 0:
                # Leave the warm-up: re-evaluate the state under the main generator.
                ell, x = self._evaluate(
                    w, torch.arange(n_chains, device=self.device), self.generator, counter
                )
                if bool(torch.isinf(ell).all()):
                    raise ValueError("every chain has log-likelihood -inf after warm-up")
            gen = warm_gen if it < n_warm else self.generator
            beta = (it + 1) / (anneal_iters + 1) if it < anneal_iters else 1.0

            def fn(
                prop: torch.Tensor,
                idx: torch.Tensor,
                _gen: Callable[[torch.Tensor], torch.Tensor] = gen,
                _beta: float = beta,
            ) -> tuple[torch.Tensor, torch.Tensor]:
                e, xx = self._evaluate(prop, idx, _gen, counter)
                return e * _beta, xx

            w, ell_t, x_new, n_calls, n_unf = _ess_kernel(
                w, ell * beta, x, fn, generator, self.max_shrink, None
            )
            x = x_new if x_new is not None else x
            ell = ell_t / beta
            calls_per_iter.append(n_calls)
            if n_unf:
                n_max_shrink += n_unf
                warnings.warn(
                    f"{n_unf} chain(s) reached max_shrink={self.max_shrink} at iteration {it}; "
                    "their state is kept",
                    RuntimeWarning,
                    stacklevel=2,
                )
            j = it - n_warm
            if j >= burn_in and (j - burn_in) % thin == 0:
                kept_z.append(self.to_source(w).clone())
                kept_ell.append(ell.clone())
                if return_x:
                    kept_x.append(x.clone())
            if callback is not None:
                callback(it, self.to_source(w), ell)
        logger.info(
            "ESS-Flow: %d chains x %d iterations, %d generator calls", n_chains, total, counter[0]
        )
        return ESSFlowResult(
            z=torch.stack(kept_z),
            x=torch.stack(kept_x) if return_x else None,
            log_lik=torch.stack(kept_ell),
            n_generator_calls=counter[0],
            n_evaluations=counter[1],
            calls_per_iter=torch.tensor(calls_per_iter),
            n_max_shrink=n_max_shrink,
            warmup_iters=n_warm,
        )
