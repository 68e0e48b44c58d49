"""Error versus iterations on a 16-dimensional linear-Gaussian problem with a closed form.

Generator ``T(z) = A z + b`` with singular values of ``A`` log-spaced in ``[1, 10]``
(condition number 10), observation ``y = T(z) + N(0, I)``: the posterior over ``z`` is
Gaussian with precision ``I + A^T A``, so its standard deviations range over 0.1-0.7 and the
tightly observed directions mix slowly. ESS-Flow runs once for the longest budget; every
shorter budget is a prefix of that run (burn-in: the first fifth of the prefix). pCN (step
tuned by a pilot) and SIR get the same number of single-sample generator evaluations as the
ESS-Flow prefix; SIR's estimates are the self-normalised importance averages that its
resampling step approximates (streamed in batches, so a 10^6-proposal budget fits in memory;
resampling would only add noise). Error: the largest ``|mean - m| / sd`` over the 16
coordinates, and the largest ``|var / var_true - 1|``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ess_flow import ESSFlow, GaussianLikelihood, MixingWarning, pcn_sample
from methodkit.bench import Claim, compare

D = 16
Fn = Callable[[torch.Tensor], torch.Tensor]


def problem(seed: int) -> dict[str, torch.Tensor]:
    """``A`` (condition 10), ``b``, ``y`` and the closed-form posterior ``(m, S)`` (float64)."""
    g = torch.Generator().manual_seed(1000 + seed)
    q1, _ = torch.linalg.qr(torch.randn(D, D, generator=g, dtype=torch.float64))
    q2, _ = torch.linalg.qr(torch.randn(D, D, generator=g, dtype=torch.float64))
    A = q1 @ torch.diag(torch.logspace(0, 1, D, dtype=torch.float64)) @ q2.T
    b = torch.randn(D, generator=g, dtype=torch.float64)
    z_true = torch.randn(D, generator=g, dtype=torch.float64)
    y = A @ z_true + b + torch.randn(D, generator=g, dtype=torch.float64)
    S = torch.linalg.inv(torch.eye(D, dtype=torch.float64) + A.T @ A)
    m = S @ (A.T @ (y - b))
    return {"A": A, "b": b, "y": y, "m": m, "S": S}


def errors(z: torch.Tensor, m: torch.Tensor, S: torch.Tensor) -> tuple[float, float]:
    """Largest standardised mean error and largest relative variance error over coordinates."""
    z = z.reshape(-1, D).double()
    sd = S.diagonal().sqrt()
    mean_err = float(((z.mean(0) - m).abs() / sd).max())
    var_err = float((z.var(0) / S.diagonal() - 1).abs().max())
    return mean_err, var_err


def run_linear16(cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    """One seed: ESS-Flow prefixes, pCN prefixes and SIR at each budget."""
    p = problem(seed)
    calls = {"n": 0}

    def gen(z: torch.Tensor) -> torch.Tensor:
        calls["n"] += z.shape[0]
        return z @ p["A"].T + p["b"]

    lik = GaussianLikelihood(None, p["y"], 1.0)
    used: list[int] = []
    n_max = max(cfg["iters"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", MixingWarning)
        res = ESSFlow(gen, lik, (D,), dtype=torch.float64).run(
            cfg["chains"], n_max, seed=seed, callback=lambda it, z, ell: used.append(calls["n"])
        )
    out: dict[str, Any] = {"mixing_warning_at_max": bool(caught)}
    betas = [0.02, 0.05, 0.1, 0.2]
    beta = _tune(gen, lik, cfg["chains"], betas, seed)
    n_pcn = max(used[-1] // cfg["chains"], 8)
    pcn = pcn_sample(gen, lik, (D,), cfg["chains"], n_pcn, beta, seed=seed + 1, dtype=torch.float64)
    out["pcn_beta"] = beta
    out["pcn_acceptance"] = pcn.acceptance_rate
    for n in cfg["iters"]:
        budget = used[n - 1]
        z_ess = res.z[n // 5 : n]
        k = max(budget // cfg["chains"] - 1, 8)  # pCN iterations with the same evaluations
        z_pcn = pcn.z[k // 5 : k]
        mean_sir, var_sir, n_eff = importance_moments(gen, lik, budget, seed + 2)
        for method, z in (("ess_flow", z_ess), ("pcn", z_pcn)):
            me, ve = errors(z, p["m"], p["S"])
            out[(method, f"mean_err_{n:05d}it")] = me
            out[(method, f"var_err_{n:05d}it")] = ve
        sd = p["S"].diagonal().sqrt()
        out[("sir", f"mean_err_{n:05d}it")] = float(((mean_sir - p["m"]).abs() / sd).max())
        out[("sir", f"var_err_{n:05d}it")] = float((var_sir / p["S"].diagonal() - 1).abs().max())
        out[f"budget_{n:05d}it"] = budget
        out[f"sir_n_eff_{n:05d}it"] = n_eff
    out["ess_bulk_min_at_max"] = float(np.min(res.ess_bulk))
    out["rhat_max_at_max"] = float(np.max(res.rhat))
    return out


def importance_moments(
    gen: Fn, lik: Fn, n_proposals: int, seed: int, batch: int = 65536
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Self-normalised importance mean and variance of ``z`` from prior proposals, streamed."""
    g = torch.Generator().manual_seed(seed)
    log_w, s1, s2 = [], [], []
    done = 0
    while done < n_proposals:
        k = min(batch, n_proposals - done)
        z = torch.randn(k, D, generator=g, dtype=torch.float64)
        lw = lik(gen(z)).double()
        c = lw.max()
        w = torch.exp(lw - c)
        log_w.append((c, w.sum(), (w**2).sum()))
        s1.append((c, w @ z))
        s2.append((c, w @ z**2))
        done += k
    c_max = max(float(c) for c, _, _ in log_w)
    scale = [math.exp(float(c) - c_max) for c, _, _ in log_w]
    total = sum(f * float(ws) for f, (_, ws, _) in zip(scale, log_w, strict=True))
    total_sq = sum(f**2 * float(w2) for f, (_, _, w2) in zip(scale, log_w, strict=True))
    mean = sum(f * v for f, (_, v) in zip(scale, s1, strict=True)) / total
    second = sum(f * v for f, (_, v) in zip(scale, s2, strict=True)) / total
    return mean, second - mean**2, total**2 / total_sq


def _tune(gen: Fn, lik: Fn, chains: int, betas: list[float], seed: int) -> float:
    """pCN step whose 100-iteration pilot acceptance is closest to 0.234 (not counted)."""
    scores = []
    for beta in betas:
        r = pcn_sample(gen, lik, (D,), chains, 100, beta, seed=seed + 7, dtype=torch.float64)
        scores.append((abs(r.acceptance_rate - 0.234), beta))
    return min(scores)[1]


def claims(val: dict[tuple[str, str], float], iters: list[int]) -> list[Claim]:
    """At the largest budget ESS-Flow's mean error is below pCN's and SIR's."""
    n = max(iters)
    e = val.get(("ess_flow", f"mean_err_{n:05d}it"), math.nan)
    out = []
    for base in ("pcn", "sir"):
        b = val.get((base, f"mean_err_{n:05d}it"), math.nan)
        out.append(
            compare(
                f"linear16: ESS-Flow mean error at {n} iterations < {base} at equal evaluations",
                e,
                "<",
                b,
                measured=f"ESS-Flow {e:.3f} vs {base} {b:.3f} posterior sd",
            )
        )
    return out
