"""The Occupancy Distribution Matrix (ODM): site-by-species occupancies of a crystal."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pymatgen.core import Composition, Element, Lattice, Structure

__all__ = ["ODM", "composition_to_marginals", "odm_from_structure", "odm_to_structure"]

MASS_TOL = 1e-8  # below this a vacancy mass counts as zero (no vacancy column)
CLOSE_SITES_A = 0.5  # sites closer than this are positional (split-site) disorder


def composition_to_marginals(
    formula: str | Composition, n_sites: int, n_formula_units: float = 1
) -> tuple[np.ndarray, np.ndarray, list[Element | None]]:
    """Marginals of the transportation polytope for a formula on ``n_sites`` candidate sites.

    Args:
        formula: chemical formula or pymatgen ``Composition`` (amounts per formula unit; may be
            fractional, e.g. ``"Li0.5Na0.5Cl"``).
        n_sites: number of candidate sites N in the cell.
        n_formula_units: formula units in the cell; ``c_k = amount_k * n_formula_units``.

    Returns:
        ``(r, c, species)``: ``r = 1`` (N,), ``c`` (M,) with ``sum c = N`` and the species of the
        columns (pymatgen ``Element`` sorted by atomic number, then ``None`` for the vacancy
        column, present iff ``c_vac = N - sum_k c_k > 0``).

    Raises:
        ValueError: if the formula needs more atoms than there are sites, or is empty/negative.
    """
    n = int(n_sites)
    if n < 1 or n != n_sites:
        raise ValueError(f"n_sites must be a positive integer, got {n_sites}")
    if not float(n_formula_units) > 0:
        raise ValueError(f"n_formula_units must be > 0, got {n_formula_units}")
    comp = formula if isinstance(formula, Composition) else Composition(formula)
    amounts = comp.element_composition.get_el_amt_dict()
    if not amounts or any(not np.isfinite(v) or v <= 0 for v in amounts.values()):
        raise ValueError(f"formula {formula!r} must have positive amounts")
    elements = sorted((Element(s) for s in amounts), key=lambda e: e.Z)
    c = [amounts[e.symbol] * float(n_formula_units) for e in elements]
    species: list[Element | None] = list(elements)
    c_vac = n - sum(c)
    if c_vac < -MASS_TOL * n:
        raise ValueError(
            f"formula {comp.formula} x {n_formula_units} needs {sum(c):g} atoms but the cell has "
            f"only {n} sites (sum(c) > N)"
        )
    if c_vac > MASS_TOL * n:
        species.append(None)
        c.append(c_vac)
    else:  # no vacancies: drop the column and absorb round-off so that sum c = N exactly
        c = [ck * n / sum(c) for ck in c]
    return np.ones(n), np.asarray(c, dtype=float), species


#: Sentinel default of ``ODM.c``: take the column sums from ``P``.
_C_FROM_P = np.empty(0)


@dataclass
class ODM:
    """Occupancy Distribution Matrix of one crystal, validated on construction.

    Attributes:
        P: (N, M) occupancies, rows = candidate sites, columns = ``species``; finite, >= 0,
            every row summing to 1 (missing occupancy goes into a vacancy column).
        species: pymatgen ``Element`` per column, ``None`` for the vacancy column.
        frac_coords: (N, 3) fractional coordinates of the candidate sites.
        lattice: pymatgen ``Lattice``.
        c: target column marginals (species counts in the cell, finite, >= 0, ``sum c = N``);
            default the column sums of P.
        tol: absolute tolerance of the checks (entries >= -tol, marginals within tol).
        check_columns: check the column sums of P against ``c`` (the formula). Off only for
            samples of baselines that do not enforce the species totals by design.
        info: free-form metadata, not compared (the synthetic data set stores the
            prototype, disorder kind, elements and spinel inversion here).

    Raises:
        ValueError: on a non-finite or negative entry, a row not summing to 1, a ``c`` that is
            non-finite, negative, of the wrong length or not summing to N, or (with
            ``check_columns``) a column sum that differs from ``c``; the message names the site
            or species.
    """

    P: np.ndarray
    species: list[Element | None]
    frac_coords: np.ndarray
    lattice: Lattice
    c: np.ndarray = field(default_factory=lambda: _C_FROM_P)
    tol: float = 1e-6
    check_columns: bool = True
    #: Free-form metadata (the synthetic data set stores prototype, disorder kind, ...).
    info: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self.P = np.asarray(self.P, dtype=float)
        self.frac_coords = np.asarray(self.frac_coords, dtype=float).reshape(-1, 3)
        if self.P.ndim != 2 or self.P.shape[1] != len(self.species):
            raise ValueError(
                f"P has shape {self.P.shape} but there are {len(self.species)} species columns"
            )
        if self.frac_coords.shape[0] != self.P.shape[0]:
            raise ValueError(
                f"frac_coords has {self.frac_coords.shape[0]} rows but P has {self.P.shape[0]}"
            )
        if not (np.isfinite(self.tol) and self.tol >= 0):
            raise ValueError(f"tol must be a finite number >= 0, got {self.tol}")
        self._check_entries()
        from_p = self.c is None or self.c is _C_FROM_P
        self.c = self.P.sum(0) if from_p else np.asarray(self.c, dtype=float)
        self._check_marginals()
        if not isinstance(self.lattice, Lattice):
            self.lattice = Lattice(self.lattice)

    def _name(self, k: int) -> str:
        e = self.species[k]
        return "vacancy" if e is None else e.symbol

    def _check_entries(self) -> None:
        bad = np.argwhere(~np.isfinite(self.P))
        if len(bad):
            i, k = (int(v) for v in bad[0])
            raise ValueError(f"P has {len(bad)} non-finite entries (NaN or inf); first at site "
                             f"{i}, species {self._name(k)}: {self.P[i, k]}")  # fmt: skip
        if self.P.size and self.P.min() < -self.tol:
            i, k = (int(v) for v in np.unravel_index(np.argmin(self.P), self.P.shape))
            raise ValueError(f"P has a negative occupancy {self.P[i, k]:.6g} at site {i}, "
                             f"species {self._name(k)} (occupancies must be >= 0)")  # fmt: skip
        rows = self.P.sum(1)
        i = int(np.argmax(np.abs(rows - 1.0))) if len(rows) else 0
        if len(rows) and abs(rows[i] - 1.0) > self.tol:
            raise ValueError(f"site {i} has total occupancy {rows[i]:.6g}; every row of P must "
                             f"sum to 1 within tol {self.tol:g} (missing occupancy belongs in "
                             "a vacancy column)")  # fmt: skip

    def _check_marginals(self) -> None:
        n, m = self.P.shape
        if self.c.shape != (m,):
            raise ValueError(f"c has shape {self.c.shape} but P has {m} species columns")
        if not np.isfinite(self.c).all() or (self.c < 0).any():
            raise ValueError(f"c must be finite and >= 0, got {self.c}")
        if abs(self.c.sum() - n) > self.tol * max(1, n):
            raise ValueError(f"c sums to {self.c.sum():.6g} but the cell has N = {n} sites "
                             "(sum c = N: the vacancy column holds N - atoms)")  # fmt: skip
        if self.check_columns:
            err = np.abs(self.P.sum(0) - self.c)
            k = int(np.argmax(err))
            if err[k] > self.tol * max(1, n):
                raise ValueError(f"column {k} ({self._name(k)}) of P sums to "
                                 f"{self.P[:, k].sum():.6g} but the formula gives c = "
                                 f"{self.c[k]:.6g} (tol {self.tol:g}; check_columns=False for "
                                 "samples that do not enforce species totals)")  # fmt: skip

    @property
    def n_sites(self) -> int:
        """Number of candidate sites N."""
        return self.P.shape[0]

    @property
    def atomic_numbers(self) -> np.ndarray:
        """Atomic number per column, 0 for the vacancy column."""
        return np.array([0 if s is None else s.Z for s in self.species], dtype=np.int64)

    def marginals(self) -> tuple[np.ndarray, np.ndarray]:
        """Row sums and column sums of P."""
        return self.P.sum(1), self.P.sum(0)

    def marginal_error(self) -> float:
        """Max absolute deviation of the row sums from 1 and the column sums from ``c``."""
        rs, cs = self.marginals()
        return float(max(np.abs(rs - 1.0).max(), np.abs(cs - self.c).max()))

    def is_feasible(self, tol: float = 1e-6) -> bool:
        """True if P is in T(1, c) within ``tol`` (entries >= -tol, marginals within tol)."""
        return bool(self.P.min() >= -tol and self.marginal_error() <= tol)

    @property
    def composition(self) -> Composition:
        """Cell composition implied by the column sums of P (vacancies excluded)."""
        cs = self.P.sum(0)
        return Composition(
            {s: float(v) for s, v in zip(self.species, cs, strict=False) if s is not None}
        )

    def to_structure(self, drop_below: float = 1e-4) -> Structure:
        """Pymatgen ``Structure``; see :func:`odm_to_structure`."""
        return odm_to_structure(self, drop_below)

    @classmethod
    def from_structure(
        cls,
        structure: Structure,
        candidate_sites: np.ndarray | None = None,
        merge_close: bool = False,
        occupancy_tol: float = 1e-6,
    ) -> ODM:
        """ODM of a pymatgen ``Structure``; see :func:`odm_from_structure`."""
        return odm_from_structure(structure, candidate_sites, merge_close, occupancy_tol)


def _site_dicts(structure: Structure, occupancy_tol: float) -> list[dict[str, float]]:
    rows = []
    for i, site in enumerate(structure):
        d: dict[str, float] = {}
        for sp, occ in site.species.items():
            occ = float(occ)
            if not np.isfinite(occ) or occ < 0:
                raise ValueError(f"site {i} ({site.species_string}) has occupancy {occ} of {sp}")
            el = getattr(sp, "element", sp).symbol if hasattr(sp, "symbol") else str(sp)
            d[el] = d.get(el, 0.0) + occ
        total = sum(d.values())
        if total > 1.0 + occupancy_tol:
            raise ValueError(
                f"site {i} ({site.species_string}) has total occupancy {total:.6g} > 1 "
                f"(+ tol {occupancy_tol:g})"
            )
        rows.append(d)
    return rows


def _merge_close(
    structure: Structure, rows: list[dict[str, float]], merge: bool
) -> tuple[np.ndarray, list[dict[str, float]]]:
    frac = structure.frac_coords.copy()
    dist = structure.distance_matrix
    np.fill_diagonal(dist, np.inf)
    close = np.argwhere(np.triu(dist < CLOSE_SITES_A))
    if len(close) == 0:
        return frac, rows
    i, j = close[0]
    msg = (
        f"sites {i} and {j} are {dist[i, j]:.3f} A apart (< {CLOSE_SITES_A} A): positional "
        "disorder; pass merge_close=True to merge close sites into one candidate site"
    )
    warnings.warn(msg, UserWarning, stacklevel=3)
    if not merge:
        return frac, rows
    groups = list(range(len(rows)))
    for a, b in close:  # union of close pairs
        ga, gb = groups[a], groups[b]
        groups = [ga if g == gb else g for g in groups]
    out_f, out_r = [], []
    for g in sorted(set(groups)):
        idx = [k for k, h in enumerate(groups) if h == g]
        ref = frac[idx[0]]
        shifted = [ref + (frac[k] - ref - np.round(frac[k] - ref)) for k in idx]
        out_f.append(np.mean(shifted, axis=0) % 1.0)
        merged: dict[str, float] = {}
        for k in idx:
            for el, v in rows[k].items():
                merged[el] = merged.get(el, 0.0) + v
        if sum(merged.values()) > 1.0 + 1e-6:
            s = sum(merged.values())
            raise ValueError(f"merged site {g} has total occupancy {s:.6g} > 1")
        out_r.append(merged)
    return np.asarray(out_f), out_r


def odm_from_structure(
    structure: Structure,
    candidate_sites: np.ndarray | None = None,
    merge_close: bool = False,
    occupancy_tol: float = 1e-6,
) -> ODM:
    """Convert a (possibly disordered) pymatgen ``Structure`` to an ODM.

    Every site becomes a row; its vacancy share is ``1 - sum(occupancies)``. Optional
    ``candidate_sites`` (K, 3) fractional coordinates add empty candidate rows (interstitials).
    Oxidation states are ignored (species are reduced to elements).

    Raises:
        ValueError: negative / NaN occupancy or site total above ``1 + occupancy_tol``, naming
            the site.

    Warns:
        UserWarning: two sites closer than 0.5 A (merged into one when ``merge_close=True``).
    """
    rows = _site_dicts(structure, occupancy_tol)
    frac, rows = _merge_close(structure, rows, merge_close)
    if candidate_sites is not None:
        cand = np.asarray(candidate_sites, dtype=float).reshape(-1, 3)
        frac = np.vstack([frac, cand % 1.0])
        rows = rows + [{} for _ in range(len(cand))]
    symbols = sorted({el for d in rows for el in d}, key=lambda s: Element(s).Z)
    P = np.array([[d.get(s, 0.0) for s in symbols] for d in rows], dtype=float)
    P = P / np.maximum(P.sum(1, keepdims=True), 1.0)  # totals in (1, 1 + tol] -> exactly 1
    vac = 1.0 - P.sum(1)
    species: list[Element | None] = [Element(s) for s in symbols]
    if vac.sum() > MASS_TOL * len(rows):
        P = np.hstack([P, np.clip(vac, 0.0, None)[:, None]])
        species.append(None)
    return ODM(P, species, frac, structure.lattice.copy())


def odm_to_structure(odm: ODM, drop_below: float = 1e-4) -> Structure:
    """Pymatgen ``Structure`` with site species dicts ``{element: P[i, k]}``.

    The vacancy column is dropped, entries below ``drop_below`` are dropped, and sites left
    empty (fully vacant candidate sites) are omitted.
    """
    species, coords = [], []
    for i in range(odm.n_sites):
        d = {
            s: float(p)
            for s, p in zip(odm.species, odm.P[i], strict=False)
            if s is not None and p >= drop_below
        }
        if d:
            total = sum(d.values())
            if total > 1.0:  # round-off above 1 would be rejected by pymatgen
                d = {k: v / total for k, v in d.items()}
            species.append(d)
            coords.append(odm.frac_coords[i] % 1.0)
    if not species:
        raise ValueError("the ODM has no occupied site above drop_below")
    return Structure(odm.lattice, species, coords)
