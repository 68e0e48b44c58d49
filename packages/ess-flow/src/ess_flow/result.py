"""The result of an ESS-Flow run and its mixing check (rank-normalised R-hat, bulk/tail ESS).

Every run carries, per source coordinate, the rank-normalised split-R-hat and the bulk and
tail effective sample sizes of Vehtari et al. (2021). :func:`check_mixing` turns them into a
:class:`MixingWarning` that says which number is off and what to raise. The default limits
are Stan's and ArviZ's: R-hat below 1.01 and bulk and tail ESS of at least 100 per chain
(400 for four chains), below which the Monte Carlo error of a posterior mean, and R-hat
itself, are not yet trustworthy.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from ess_flow.diagnostics import effective_sample_size, ess_bulk, ess_tail, rank_rhat, rhat

__all__ = ["ESSFlowResult", "MixingWarning", "check_mixing", "mixing_report"]

DEFAULT_MAX_RHAT = 1.01
DEFAULT_MIN_ESS_PER_CHAIN = 100.0


class MixingWarning(RuntimeWarning):
    """The chains have not mixed enough for their estimates to be trusted yet."""


def mixing_report(z: torch.Tensor) -> dict[str, NDArray[np.float64]]:
    """Per-coordinate ``rhat``, ``ess_bulk``, ``ess_tail`` of draws ``(n_kept, n_chains, ...)``.

    With fewer than 4 kept draws per chain every entry is NaN (the estimators need 4).
    """
    zz = z.reshape(z.shape[0], z.shape[1], -1).detach().double().cpu().numpy()
    if zz.shape[0] < 4:
        nan = np.full(zz.shape[-1], np.nan)
        return {"rhat": nan, "ess_bulk": nan.copy(), "ess_tail": nan.copy()}
    return {"rhat": rank_rhat(zz), "ess_bulk": ess_bulk(zz), "ess_tail": ess_tail(zz)}


def check_mixing(
    report: dict[str, NDArray[np.float64]],
    n_chains: int,
    n_iter_kept: int,
    *,
    max_rhat: float = DEFAULT_MAX_RHAT,
    min_ess_per_chain: float = DEFAULT_MIN_ESS_PER_CHAIN,
    stacklevel: int = 2,
) -> str | None:
    """Warn (:class:`MixingWarning`) when R-hat or the minimum ESS per chain is off its limit.

    Args:
        report: Output of :func:`mixing_report`.
        n_chains: Number of chains.
        n_iter_kept: Iterations whose draws were kept (``n_iter - burn_in``).
        max_rhat: Largest acceptable rank-normalised R-hat.
        min_ess_per_chain: Smallest acceptable ``min(bulk, tail) ESS / n_chains``.
        stacklevel: Passed to :func:`warnings.warn`.

    Returns:
        The warning's message, or None when both limits hold.
    """
    r, ess = report["rhat"], np.minimum(report["ess_bulk"], report["ess_tail"])
    if np.isnan(ess).all():
        msg = (
            "fewer than 4 kept draws per chain: R-hat and ESS are not available; "
            "raise n_iter - burn_in (and thin less)"
        )
        warnings.warn(msg, MixingWarning, stacklevel=stacklevel)
        return msg
    problems = []
    per_chain = float(np.nanmin(ess)) / n_chains
    if per_chain < min_ess_per_chain:
        j = int(np.nanargmin(ess))
        factor = math.ceil(min_ess_per_chain / max(per_chain, 1e-3))
        problems.append(
            f"minimum bulk/tail ESS per chain is {per_chain:.1f} (coordinate {j}) < "
            f"{min_ess_per_chain:g}: raise the kept iterations n_iter - burn_in about "
            f"{factor}x (to ~{factor * n_iter_kept})"
        )
    high = r > max_rhat
    if high.any():
        problems.append(
            f"rank-normalised R-hat is {float(np.nanmax(r)):.3f} > {max_rhat:g} on "
            f"{int(high.sum())} coordinate(s): the chains disagree; raise burn_in and n_iter "
            "(or anneal_iters for separated modes)"
        )
    if np.isnan(r).any():
        problems.append(
            f"R-hat is undefined on {int(np.isnan(r).sum())} coordinate(s) that no chain moved "
            "(every proposal rejected): raise max_shrink or loosen the likelihood"
        )
    if not problems:
        return None
    msg = "ESS-Flow estimates are not reliable yet: " + "; ".join(problems)
    warnings.warn(msg, MixingWarning, stacklevel=stacklevel)
    return msg


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
        rhat: Rank-normalised split-R-hat per source coordinate, ``(prod(source_shape),)``.
        ess_bulk: Bulk effective sample size per source coordinate.
        ess_tail: Tail (5 % / 95 % quantile) effective sample size per source coordinate.
        mixing_warning: The :class:`MixingWarning` message the run issued, or None.
    """

    z: torch.Tensor
    x: torch.Tensor | None
    log_lik: torch.Tensor
    n_generator_calls: int
    n_evaluations: int
    calls_per_iter: torch.Tensor
    n_max_shrink: int = 0
    warmup_iters: int = 0
    rhat: NDArray[np.float64] | None = None
    ess_bulk: NDArray[np.float64] | None = None
    ess_tail: NDArray[np.float64] | None = None
    mixing_warning: str | None = None
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
        """Scalar diagnostics: cost, worst rank-normalised R-hat and ESS, classic ``n_eff``."""
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
            if self.rhat is not None and self.ess_bulk is not None and self.ess_tail is not None:
                out.update(
                    rank_rhat_max=float(np.max(self.rhat)),
                    ess_bulk_min=float(np.min(self.ess_bulk)),
                    ess_tail_min=float(np.min(self.ess_tail)),
                )
        return out
