"""Disorder-aware metrics: validity, composition, tolerant structure matching, site errors."""

from __future__ import annotations

import numpy as np
from pymatgen.analysis.structure_matcher import AbstractComparator, StructureMatcher
from scipy.optimize import linear_sum_assignment

from ep_flow.odm import ODM

__all__ = [
    "OccupancyToleranceComparator",
    "composition_match",
    "match_rate",
    "occupancy_validity",
    "site_occupancy_error",
    "sparsity_recall",
]


class OccupancyToleranceComparator(AbstractComparator):
    """Site species dicts are equal if every occupancy differs by at most ``delta``.

    Entries below ``delta / 2`` are dropped from both sides first. No hash (``get_hash`` is a
    constant): compositions are compared separately by :func:`composition_match`.
    """

    def __init__(self, delta: float = 0.1) -> None:
        if not delta > 0:
            raise ValueError(f"delta must be > 0, got {delta}")
        self.delta = float(delta)

    def _clean(self, sp: dict) -> dict[str, float]:
        out: dict[str, float] = {}
        for s, v in sp.items():
            el = getattr(s, "symbol", str(s))
            out[el] = out.get(el, 0.0) + float(v)
        return {k: v for k, v in out.items() if v >= self.delta / 2}

    def are_equal(self, sp1: dict, sp2: dict) -> bool:
        """True if every occupancy differs by at most delta (after dropping small ones)."""
        a, b = self._clean(sp1), self._clean(sp2)
        return all(abs(a.get(k, 0.0) - b.get(k, 0.0)) <= self.delta for k in set(a) | set(b))

    def get_hash(self, composition: object) -> int:
        """No hash is possible with a tolerance: a constant."""
        return 1

    def as_dict(self) -> dict:
        """Serialisable form."""
        return {"@module": type(self).__module__, "@class": type(self).__name__,
                "delta": self.delta}  # fmt: skip


def _matcher(delta: float) -> StructureMatcher:
    return StructureMatcher(stol=0.5, ltol=0.3, angle_tol=10, primitive_cell=False,
                            comparator=OccupancyToleranceComparator(delta))  # fmt: skip


def occupancy_validity(
    odms: list[ODM], max_error: float = 1e-4, min_entry: float = -1e-9
) -> tuple[float, float]:
    """Share of valid ODMs and the mean marginal error.

    Valid: marginal error <= ``max_error`` and min entry >= ``min_entry``. Marginals are
    checked against ``odm.c`` (the condition).
    """
    err = np.array([o.marginal_error() for o in odms])
    ok = np.array([o.P.min() >= min_entry for o in odms]) & (err <= max_error)
    return float(ok.mean()), float(err.mean())


def composition_match(preds: list[ODM], tol: float = 1e-3) -> float:
    """Share of ODMs whose cell composition equals the condition within ``tol`` per element."""
    hits = []
    for o in preds:
        real = np.array([s is not None for s in o.species])
        hits.append(bool(np.all(np.abs(o.P.sum(0)[real] - o.c[real]) <= tol)))
    return float(np.mean(hits))


def match_rate(
    samples: list[list[ODM]], truths: list[ODM], delta: float = 0.1
) -> tuple[float, float]:
    """Share of test crystals matched by one of their samples, and the mean RMS of matches.

    ``StructureMatcher(stol=0.5, ltol=0.3,
    angle_tol=10)`` with :class:`OccupancyToleranceComparator`; both structures drop entries
    below ``delta / 2`` (empty candidate sites vanish on both sides alike).
    """
    sm = _matcher(delta)
    hits, rms = [], []
    for cands, true in zip(samples, truths, strict=False):
        ts = true.to_structure(drop_below=delta / 2)
        hit = False
        for cand in cands:
            try:
                ps = cand.to_structure(drop_below=delta / 2)
                res = sm.get_rms_dist(ps, ts) if len(ps) == len(ts) else None
            except (ValueError, np.linalg.LinAlgError):
                res = None
            if res is not None:
                hit = True
                rms.append(float(res[0]))
                break
        hits.append(hit)
    return float(np.mean(hits)), float(np.mean(rms)) if rms else float("nan")


def _assign(pred: ODM, true: ODM) -> np.ndarray:
    """Pred row for each true row: Hungarian on periodic distance, best of N translations."""
    best, best_cost = None, np.inf
    for j in range(pred.n_sites):  # translate pred site j onto true site 0
        shift = true.frac_coords[0] - pred.frac_coords[j]
        d = true.frac_coords[:, None] - (pred.frac_coords[None] + shift)
        d = d - np.round(d)
        cost = np.linalg.norm(d @ true.lattice.matrix, axis=-1)
        rows, cols = linear_sum_assignment(cost)
        total = cost[rows, cols].sum()
        if total < best_cost:
            best, best_cost = cols, total
    if best is None:
        raise ValueError(
            f"no finite site assignment between pred ({pred.n_sites} sites) and true "
            f"({true.n_sites} sites)"
        )
    return best


def site_occupancy_error(pred: ODM, true: ODM) -> float:
    """Mean L1 distance between true rows and their assigned predicted rows."""
    cols = _assign(pred, true)
    return float(np.abs(pred.P[cols] - true.P).sum(1).mean())


def sparsity_recall(pred: ODM, true: ODM, threshold: float = 0.05) -> float:
    """Share of the true zero entries predicted below ``threshold`` (NaN if none)."""
    cols = _assign(pred, true)
    zero = true.P == 0
    if not zero.any():
        return float("nan")
    return float((pred.P[cols][zero] < threshold).mean())
