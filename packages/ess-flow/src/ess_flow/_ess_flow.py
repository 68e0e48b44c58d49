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

import torch

from ess_flow.result import (
    DEFAULT_MAX_RHAT,
    DEFAULT_MIN_ESS_PER_CHAIN,
    ESSFlowResult,
    check_mixing,
    mixing_report,
)
from ess_flow.schedule import ChainState, RunSchedule
from ess_flow.source import validated_prior
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
        self.prior_mean, self.prior_scale_tril = validated_prior(
            prior_mean, prior_scale_tril, source_shape, self.device, dtype
        )

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
        schedule: RunSchedule,
        counter: list[int],
        max_init_tries: int,
    ) -> ChainState:
        """Initial states of all chains (``init`` tensor, prior draw, or prior search)."""
        gen = schedule.generator_at(0)
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
            return ChainState(w, ell, x)
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
        return ChainState(*self._search(w, ell, x.clone(), bad, rng, gen, counter, max_init_tries))

    def _search(
        self,
        w: torch.Tensor,
        ell: torch.Tensor,
        x: torch.Tensor,
        bad: torch.Tensor,
        rng: torch.Generator,
        gen: Callable[[torch.Tensor], torch.Tensor],
        counter: list[int],
        max_init_tries: int,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Redraw the chains marked ``bad`` from the prior until their likelihood is finite."""
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

    # -- main loop: named steps ------------------------------------------------------------
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
        progress: bool | None = None,
        max_rhat: float = DEFAULT_MAX_RHAT,
        min_ess_per_chain: float = DEFAULT_MIN_ESS_PER_CHAIN,
    ) -> ESSFlowResult:
        """Run ``n_chains`` chains for ``n_iter`` iterations after an optional warm-up.

        Warm-up (never returned): ``anneal_iters`` iterations tempered by ``beta_k = (k + 1) /
        (anneal_iters + 1)`` and ``low_fidelity_iters`` on the ``low_fidelity_generator``. Then
        ``burn_in`` main iterations are dropped and every ``thin``-th is kept; the kept draws get
        R-hat and bulk / tail ESS, and a :class:`~ess_flow.MixingWarning` says what to raise.

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
            progress: A bar over the iterations: ``None`` (default) on a terminal only,
                ``True`` always, ``False`` never (``TQDM_DISABLE=1`` silences it).
            max_rhat: Warn when a coordinate's rank-normalised R-hat exceeds this.
            min_ess_per_chain: Warn when ``min(bulk, tail ESS) / n_chains`` is below this.

        Returns:
            An :class:`ESSFlowResult` with samples, cost counters and mixing diagnostics.

        Raises:
            ValueError: For invalid arguments, NaN / wrong-shape likelihoods, non-finite
                generator output, or all chains at ``-inf`` under ``init="prior"``.
            RuntimeError: If ``init="search"`` exhausts ``max_init_tries``.
        """
        schedule = self._schedule(
            n_chains, n_iter, burn_in, thin, anneal_iters, low_fidelity_iters, max_init_tries
        )
        generator = self._rng(seed) if generator is None else generator
        counter = [0, 0]  # batched generator calls, single-sample evaluations
        state = self._init(n_chains, init, generator, schedule, counter, max_init_tries)
        self._sample(state, schedule, generator, counter, return_x, callback, progress)
        return self._result(state, schedule, counter, return_x, max_rhat, min_ess_per_chain)

    def _sample(
        self,
        state: ChainState,
        schedule: RunSchedule,
        rng: torch.Generator,
        counter: list[int],
        return_x: bool,
        callback: Callable[[int, torch.Tensor, torch.Tensor], None] | None,
        progress: bool | None,
    ) -> None:
        """The main loop: warm-up hand-over, one ESS transition per iteration, keep, callback."""
        from methodkit import progress as _progress

        total = schedule.total
        for it in _progress(range(total), progress, desc="ESS-Flow", total=total):
            self._leave_warmup_if_due(it, state, schedule, counter)
            self._iterate(it, state, schedule, rng, counter)
            if schedule.keeps(it):
                state.keep(self.to_source(state.w), return_x)
            if callback is not None:
                callback(it, self.to_source(state.w), state.ell)
        logger.info(
            "ESS-Flow: %d chains x %d iterations, %d generator calls",
            schedule.n_chains,
            total,
            counter[0],
        )

    def _rng(self, seed: int | None) -> torch.Generator:
        """A fresh ``torch.Generator`` on the chains' device, seeded when ``seed`` is given."""
        return seeded_generator(None if seed is None else int(seed), device=self.device)

    def _schedule(
        self,
        n_chains: int,
        n_iter: int,
        burn_in: int,
        thin: int,
        anneal_iters: int,
        low_fidelity_iters: int,
        max_init_tries: int,
    ) -> RunSchedule:
        """Validate the run's integer arguments and return its iteration schedule."""
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
        warm_gen = self.generator
        if low_fidelity_iters > 0 and self.low_fidelity_generator is not None:
            warm_gen = self.low_fidelity_generator
        return RunSchedule(
            n_chains, n_iter, burn_in, thin, anneal_iters, low_fidelity_iters,
            warm_gen, self.generator,
        )  # fmt: skip

    def _leave_warmup_if_due(
        self, it: int, state: ChainState, schedule: RunSchedule, counter: list[int]
    ) -> None:
        """At the end of a low-fidelity warm-up, re-evaluate the state under the main generator."""
        if it != schedule.n_warm or schedule.low_fidelity_iters == 0:
            return
        all_idx = torch.arange(schedule.n_chains, device=self.device)
        state.ell, state.x = self._evaluate(state.w, all_idx, self.generator, counter)
        if bool(torch.isinf(state.ell).all()):
            raise ValueError("every chain has log-likelihood -inf after warm-up")

    def _iterate(
        self,
        it: int,
        state: ChainState,
        schedule: RunSchedule,
        rng: torch.Generator,
        counter: list[int],
    ) -> None:
        """One ESS transition of every chain at iteration ``it`` (tempered during warm-up)."""
        gen, beta = schedule.generator_at(it), schedule.beta_at(it)

        def fn(prop: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            e, xx = self._evaluate(prop, idx, gen, counter)
            return e * beta, xx

        w, ell_t, x_new, n_calls, n_unf = _ess_kernel(
            state.w, state.ell * beta, state.x, fn, rng, self.max_shrink, None
        )
        state.w = w
        state.x = x_new if x_new is not None else state.x
        state.ell = ell_t / beta
        state.calls_per_iter.append(n_calls)
        if n_unf:
            state.n_max_shrink += n_unf
            warnings.warn(
                f"{n_unf} chain(s) reached max_shrink={self.max_shrink} at iteration {it}; "
                "their state is kept",
                RuntimeWarning,
                stacklevel=4,
            )

    def _result(
        self,
        state: ChainState,
        schedule: RunSchedule,
        counter: list[int],
        return_x: bool,
        max_rhat: float,
        min_ess_per_chain: float,
    ) -> ESSFlowResult:
        """Stack the kept draws, attach the mixing diagnostics and warn if they are off."""
        z = torch.stack(state.kept_z)
        report = mixing_report(z)
        message = check_mixing(
            report,
            schedule.n_chains,
            schedule.n_iter - schedule.burn_in,
            max_rhat=max_rhat,
            min_ess_per_chain=min_ess_per_chain,
            stacklevel=4,
        )
        return ESSFlowResult(
            z=z,
            x=torch.stack(state.kept_x) if return_x else None,
            log_lik=torch.stack(state.kept_ell),
            n_generator_calls=counter[0],
            n_evaluations=counter[1],
            calls_per_iter=torch.tensor(state.calls_per_iter),
            n_max_shrink=state.n_max_shrink,
            warmup_iters=schedule.n_warm,
            rhat=report["rhat"],
            ess_bulk=report["ess_bulk"],
            ess_tail=report["ess_tail"],
            mixing_warning=message,
        )
