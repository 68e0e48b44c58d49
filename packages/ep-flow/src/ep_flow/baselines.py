"""Baselines of EP-Flow.

An adapted ordered generator, a row-simplex flow, the independence coupling and a
linear (no log / Sinkhorn link) ablation. All learned ones share EP-Flow's network and
geometry flow and differ only in the occupancy representation.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from torch import Tensor

from ep_flow._ep_flow import EPFlow
from ep_flow.data import CrystalBatch
from ep_flow.odm import ODM
from ep_flow.polytope import rebalance_on_support

__all__ = [
    "IndependenceCoupling",
    "LinearDoubleCenteredFlow",
    "OrderedCSPFlow",
    "RowSimplexFlow",
    "largest_remainder",
    "round_to_ordered",
]


def largest_remainder(c: np.ndarray, total: int) -> np.ndarray:
    """Integers ``n_k`` with ``sum n = total`` closest to ``c`` (largest-remainder rounding)."""
    c = np.asarray(c, dtype=float)
    scaled = c * total / c.sum()
    n = np.floor(scaled + 1e-9).astype(int)
    rest = total - int(n.sum())
    order = np.argsort(-(scaled - n), kind="stable")
    n[order[:rest]] += 1
    return n


def round_to_ordered(P: np.ndarray, c: np.ndarray) -> np.ndarray:
    """0/1 matrix with integer column counts (largest remainder of ``c``) closest to ``P``.

    One species per site: a Hungarian assignment of sites to column slots maximising the
    occupancy agreement ``sum_i P[i, k(i)]``.
    """
    N = P.shape[0]
    counts = largest_remainder(c, N)
    slots = np.repeat(np.arange(len(counts)), counts)
    rows, cols = linear_sum_assignment(-P[:, slots])
    out = np.zeros_like(P)
    out[rows, slots[cols]] = 1.0
    return out


class OrderedCSPFlow(EPFlow):
    """Adapted ordered generator (DiffCSP-style CSP): one species per site, occupancies 0/1.

    Training targets are the training crystals rounded to ordered ones (integer counts by
    largest remainder, Hungarian site assignment); samples are decoded like EP-Flow and rounded
    the same way. Same network and geometry flow as EP-Flow.
    """

    exact_marginals = False  # integer counts: fractional formulas are missed by design

    def prepare(self, crystals: list[ODM]) -> list[ODM]:
        """See :class:`ep_flow.EPFlow`; overridden for this representation."""
        out = []
        for o in crystals:
            P = round_to_ordered(o.P, o.c)
            keep = P.sum(0) > 0  # a column rounded to zero atoms is dropped
            out.append(ODM(P[:, keep], [s for s, k in zip(o.species, keep, strict=False) if k],
                           o.frac_coords, o.lattice))  # fmt: skip
        return out

    def decode(self, Z: Tensor, r: Tensor, c: Tensor, rm: Tensor, cm: Tensor) -> Tensor:
        """See :class:`ep_flow.EPFlow`; overridden for this representation."""
        P = super().decode(Z, r, c, rm, cm)
        out = torch.zeros_like(P)
        for b in range(P.shape[0]):
            n, m = int(rm[b].sum()), int(cm[b].sum())
            Pb = P[b, :n, :m].cpu().numpy()
            out[b, :n, :m] = torch.from_numpy(round_to_ordered(Pb, c[b, :m].cpu().numpy()))
        return out


class RowSimplexFlow(EPFlow):
    """DMFlow-like row-simplex flow: per-site logits, Euclidean flow, softmax per row.

    Coordinates ``X = log(P_eps) H_M`` (row-centred logits); the velocity is projected with
    ``f H_M`` only. Each decoded row is a distribution (site constraint holds), the species
    totals are not enforced.
    """

    exact_marginals = False

    def encode(self, batch: CrystalBatch) -> Tensor:
        """See :class:`ep_flow.EPFlow`; overridden for this representation."""
        P = batch.P.double()
        w = batch.row_mask[:, :, None] & batch.col_mask[:, None]
        n = batch.r.double().sum(1)[:, None, None]
        Pe = (1 - self.config.eps) * P + self.config.eps * batch.r.double()[
            :, :, None
        ] * batch.c.double()[:, None] / n
        L = torch.where(w, torch.log(torch.where(w, Pe, torch.ones_like(Pe))), torch.zeros_like(Pe))
        return self.project(L, batch.row_mask, batch.col_mask).to(batch.P.dtype)

    def project(self, v: Tensor, rm: Tensor, cm: Tensor) -> Tensor:
        """See :class:`ep_flow.EPFlow`; overridden for this representation."""
        w = (rm[:, :, None] & cm[:, None]).to(v.dtype)
        m = w.sum(2, keepdim=True).clamp_min(1)
        return (v - (v * w).sum(2, keepdim=True) / m) * w

    def decode(self, Z: Tensor, r: Tensor, c: Tensor, rm: Tensor, cm: Tensor) -> Tensor:
        """See :class:`ep_flow.EPFlow`; overridden for this representation."""
        logits = Z.masked_fill(~cm[:, None, :], float("-inf"))
        P = torch.softmax(logits, dim=2) * rm[:, :, None]
        return torch.nan_to_num(P) * r[:, :, None]


class LinearDoubleCenteredFlow(EPFlow):
    """Ablation: flow on ``P - r c^T / N`` in D without the log / Sinkhorn link.

    Decoded by adding ``r c^T / N`` back, clipping negatives and Sinkhorn re-balancing on the
    support (the independence coupling where that support is infeasible).
    """

    def encode(self, batch: CrystalBatch) -> Tensor:
        """See :class:`ep_flow.EPFlow`; overridden for this representation."""
        w = (batch.row_mask[:, :, None] & batch.col_mask[:, None]).to(batch.P.dtype)
        return (batch.P - _independent(batch.r, batch.c)) * w

    def decode(self, Z: Tensor, r: Tensor, c: Tensor, rm: Tensor, cm: Tensor) -> Tensor:
        """See :class:`ep_flow.EPFlow`; overridden for this representation."""
        base = _independent(r, c) * (rm[:, :, None] & cm[:, None])
        P, ok = rebalance_on_support(Z + base, r, c, row_mask=rm, col_mask=cm)
        return torch.where(ok[:, None, None], P, base)


def _independent(r: Tensor, c: Tensor) -> Tensor:
    return r[:, :, None] * c[:, None] / r.sum(1)[:, None, None]


class IndependenceCoupling:
    """Non-learned occupancy ``P = r c^T / N`` on a trained EP-Flow's generated geometry.

    Matches the global composition exactly but carries no local disorder pattern.
    """

    def __init__(self, flow: EPFlow) -> None:
        self.flow = flow

    def sample(
        self, conditions: list, n_steps: int = 50, n_samples: int = 1, seed: int = 0
    ) -> list[ODM]:
        """Like ``EPFlow.sample`` (same geometry for the same seed), occupancies replaced."""
        out = self.flow.sample(conditions, n_steps, n_samples, seed)
        for o in out:
            o.P = np.outer(np.ones(o.n_sites), o.c) / o.n_sites
        return out
