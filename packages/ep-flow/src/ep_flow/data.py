"""Synthetic disordered crystals from crystallographic prototypes, batching, CIF input.

The dataset is generated with pymatgen (no downloads): eight prototypes built with
``Structure.from_spacegroup`` and reduced to the primitive cell (N <= 14 candidate sites), with
ordered, substitutional, vacancy, interstitial and mixed disorder and spinel inversion.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

import numpy as np
import torch
from pymatgen.core import Composition, Element, Lattice, Structure
from torch import Tensor

from ep_flow.odm import ODM, composition_to_marginals, odm_from_structure
from ep_flow.polytope import DEFAULT_EPS, canonicalize

__all__ = [
    "ANIONS",
    "A_POOL",
    "B_POOL",
    "PROTOTYPES",
    "CrystalBatch",
    "Prototype",
    "collate_crystals",
    "condition_of",
    "from_cif",
    "lattice_vector",
    "make_disordered_dataset",
    "make_splits",
]

A_POOL = ("Li", "Na", "K", "Mg", "Ca", "Sr", "Ba", "La", "Y")
B_POOL = ("Ti", "Zr", "Mn", "Fe", "Co", "Ni", "Al", "Ga", "Cr", "Zn")
ANIONS = ("O", "F", "S", "Cl", "Se")
INTERSTITIALS = ("Li", "Na", "Mg")
FRACTIONS = (1 / 4, 1 / 3, 1 / 2, 2 / 3, 3 / 4)
VACANCY_OCC = (0.75, 0.8, 0.875, 0.9, 0.95)
INTERSTITIAL_OCC = (1 / 8, 1 / 4)
INVERSION = (0.0, 0.5, 1.0)
DISORDER_MIX = {  # share of samples per disorder type (spec, "Small-scale reproduction")
    "ordered": 0.25,
    "substitutional": 0.35,
    "vacancy": 0.20,
    "interstitial": 0.10,
    "substitution+vacancy": 0.10,
}
POOLS = {"A": A_POOL, "B": B_POOL, "M": A_POOL + B_POOL, "X": ANIONS}


@dataclass(frozen=True)
class Prototype:
    """A prototype: space group, Wyckoff orbits with their role and a lattice-constant rule.

    ``roles``: "A"/"B"/"M" cation orbits (A-type, B-type, either pool), "X" anion, "I" empty
    interstitial candidate. ``factor`` maps the cation-anion distance d (occupancy-weighted
    ionic radii) to the conventional lattice constant ``a = factor * d``; ``c_over_a`` fixes c.
    """

    name: str
    spacegroup: str
    lattice: str  # "cubic", "tetragonal" or "hexagonal"
    coords: tuple[tuple[float, float, float], ...]
    roles: tuple[str, ...]
    wyckoff: tuple[str, ...]
    factor: float
    c_over_a: float = 1.0
    bond_orbit: int = 0  # the cation orbit whose bond length sets the lattice constant


S3 = 3**0.5
PROTOTYPES: dict[str, Prototype] = {
    p.name: p
    for p in [
        Prototype("rocksalt", "Fm-3m", "cubic", ((0, 0, 0), (0.5, 0.5, 0.5), (0.25, 0.25, 0.25)),
                  ("M", "X", "I"), ("4a", "4b", "8c"), 2.0),
        Prototype("cscl", "Pm-3m", "cubic", ((0, 0, 0), (0.5, 0.5, 0.5)), ("A", "X"),
                  ("1a", "1b"), 2 / S3),
        Prototype("fluorite", "Fm-3m", "cubic", ((0, 0, 0), (0.25, 0.25, 0.25), (0.5, 0.5, 0.5)),
                  ("M", "X", "I"), ("4a", "8c", "4b"), 4 / S3),
        Prototype("perovskite", "Pm-3m", "cubic", ((0, 0, 0), (0.5, 0.5, 0.5), (0.5, 0, 0)),
                  ("B", "A", "X"), ("1a", "1b", "3d"), 2.0),
        # Fd-3m origin choice 1 (pymatgen's default): 8a (0,0,0), 16d (5/8,5/8,5/8),
        # 32e x = 0.385 = 0.26 + 1/8 (u = 0.26 in origin choice 2)
        Prototype("spinel", "Fd-3m", "cubic",
                  ((0, 0, 0), (0.625, 0.625, 0.625), (0.385, 0.385, 0.385)),
                  ("A", "B", "X"), ("8a", "16d", "32e"), 4.19, bond_orbit=1),
        Prototype("zincblende", "F-43m", "cubic",
                  ((0, 0, 0), (0.25, 0.25, 0.25), (0.5, 0.5, 0.5)),
                  ("B", "X", "I"), ("4a", "4c", "4b"), 4 / S3),
        Prototype("rutile", "P4_2/mnm", "tetragonal", ((0, 0, 0), (0.305, 0.305, 0)),
                  ("B", "X"), ("2a", "4f"), 2.34, c_over_a=0.64),
        Prototype("wurtzite", "P6_3mc", "hexagonal", ((1 / 3, 2 / 3, 0), (1 / 3, 2 / 3, 0.375)),
                  ("B", "X"), ("2b", "2b'"), 1.64, c_over_a=1.63),
    ]
}  # fmt: skip
PLACEHOLDERS = ("H", "He", "Li", "Be")


@cache
def _template(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Primitive cell of a prototype at a = 1: (lattice matrix, frac coords, orbit index)."""
    p = PROTOTYPES[name]
    a = 5.0  # build at 5 A (primitive search tolerance is absolute), scale to 1 afterwards
    lat = {
        "cubic": Lattice.cubic(a),
        "tetragonal": Lattice.tetragonal(a, a * p.c_over_a),
        "hexagonal": Lattice.hexagonal(a, a * p.c_over_a),
    }[p.lattice]
    conv = Structure.from_spacegroup(p.spacegroup, lat, list(PLACEHOLDERS[: len(p.coords)]),
                                     [list(c) for c in p.coords])  # fmt: skip
    prim = conv.get_primitive_structure()
    orbit = np.array([PLACEHOLDERS.index(s.specie.symbol) for s in prim])
    order = np.argsort(orbit, kind="stable")
    return prim.lattice.matrix / a, prim.frac_coords[order], orbit[order]


def _pick(rng: np.random.Generator, pool: tuple, k: int, exclude: list | tuple = ()) -> list[str]:
    choices = [e for e in pool if e not in exclude]
    return [str(e) for e in rng.choice(choices, size=k, replace=False)]


def _mix_fractions(rng: np.random.Generator) -> tuple[float, ...]:
    """Fractions of 2 or 3 species sharing one orbit, each from FRACTIONS, summing to 1."""
    if rng.random() < 0.7:
        f = float(rng.choice(FRACTIONS))
        return (f, 1.0 - f)
    return tuple(rng.permutation([1 / 4, 1 / 4, 1 / 2])) if rng.random() < 0.5 else (1 / 3,) * 3


def _orbit_occupancies(p: Prototype, kind: str, rng: np.random.Generator) -> tuple[list, dict]:
    """Species dicts per orbit for one sample, and its metadata."""
    used: list[str] = []
    occ: list[dict[str, float]] = []
    for role in p.roles:
        if role == "I":
            occ.append({})
            continue
        el = _pick(rng, POOLS[role], 1, exclude=used)[0]
        used.append(el)
        occ.append({el: 1.0})
    info: dict = {"prototype": p.name, "disorder": kind}
    real = [i for i, role in enumerate(p.roles) if role != "I"]
    if p.name == "spinel":  # inversion degree x: tet A_{1-x} B_x, oct A_{x/2} B_{1-x/2}
        x = float(rng.choice(INVERSION))
        (a_el,), (b_el,) = occ[0], occ[1]
        occ[0] = {a_el: 1 - x, b_el: x}
        occ[1] = {a_el: x / 2, b_el: 1 - x / 2}
        info.update(disorder="inversion", inversion=x)
        return [{k: v for k, v in d.items() if v > 0} for d in occ], info
    if kind in ("substitutional", "substitution+vacancy"):
        o = int(rng.choice(real))
        fr = _mix_fractions(rng)
        host = next(iter(occ[o]))
        others = _pick(rng, POOLS[p.roles[o]], len(fr) - 1, exclude=used)
        used += others
        occ[o] = dict(zip([host, *others], fr, strict=False))
        info["substituted_orbit"] = p.wyckoff[o]
        sub = o
    else:
        sub = -1
    if kind in ("vacancy", "substitution+vacancy"):
        left = [i for i in real if i != sub] or real
        o = int(rng.choice(left))
        v = float(rng.choice(VACANCY_OCC))
        occ[o] = {k: val * v for k, val in occ[o].items()}
        info["vacancy_orbit"] = p.wyckoff[o]
    if kind == "interstitial":
        o = p.roles.index("I")
        el = _pick(rng, INTERSTITIALS, 1, exclude=used)[0]
        occ[o] = {el: float(rng.choice(INTERSTITIAL_OCC))}
        info["interstitial"] = el
    return occ, info


def _lattice_constant(p: Prototype, occ: list[dict[str, float]], rng: np.random.Generator) -> float:
    def mean_radius(d: dict[str, float], anion: bool) -> float:
        tot = sum(d.values())
        attr = "average_anionic_radius" if anion else "average_cationic_radius"
        return sum(float(getattr(Element(e), attr)) * v for e, v in d.items()) / tot

    x = p.roles.index("X")
    d = mean_radius(occ[p.bond_orbit], False) + mean_radius(occ[x], True)
    return p.factor * d * (1.0 + 0.01 * rng.standard_normal())


def _sample(p: Prototype, kind: str, rng: np.random.Generator) -> ODM:
    occ, info = _orbit_occupancies(p, kind, rng)
    matrix, frac, orbit = _template(p.name)
    a = _lattice_constant(p, occ, rng)
    symbols = sorted({e for d in occ for e in d}, key=lambda s: Element(s).Z)
    P = np.array([[occ[o].get(s, 0.0) for s in symbols] for o in orbit])
    vac = 1.0 - P.sum(1)
    species: list[Element | None] = [Element(s) for s in symbols]
    if vac.max() > 1e-12:
        P = np.hstack([P, np.clip(vac, 0, None)[:, None]])
        species.append(None)
    info["elements"] = tuple(symbols)
    info["orbits"] = [p.wyckoff[o] for o in orbit]
    odm = ODM(P, species, frac.copy(), Lattice(matrix * a))
    odm.info = info
    return odm


def _draw(rng: np.random.Generator) -> ODM:
    kinds = list(DISORDER_MIX)
    kind = str(rng.choice(kinds, p=list(DISORDER_MIX.values())))
    names = [n for n, p in PROTOTYPES.items() if kind != "interstitial" or "I" in p.roles]
    return _sample(PROTOTYPES[str(rng.choice(names))], kind, rng)


def make_disordered_dataset(n: int, seed: int = 0) -> list[ODM]:
    """``n`` synthetic disordered crystals as ODMs (metadata in ``odm.info``).

    Disorder mix: 25 % ordered, 35 % substitutional (one orbit shared by 2-3 species), 20 %
    vacancy, 10 % interstitial (Li/Na/Mg at 1/8 or 1/4 on the candidate orbit), 10 %
    substitution plus vacancy; spinels draw an inversion degree x in {0, 0.5, 1} instead.
    Lattice constants from occupancy-weighted ionic radii x a prototype factor x (1 + N(0, .01)).
    """
    if int(n) < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = np.random.default_rng(seed)
    return [_draw(rng) for _ in range(int(n))]


def _pairs(odm: ODM) -> set[tuple[str, str]]:
    return set(itertools.combinations(sorted(odm.info["elements"]), 2))


def make_splits(
    n_train: int = 4000, n_test: int = 400, seed: int = 0, heldout_share: float = 0.2
) -> tuple[list[ODM], list[ODM], dict]:
    """Train / test split where half the test samples contain an element pair unseen in train.

    A random ``heldout_share`` of all element pairs is held out: training samples contain none
    of them; the first half of the test set contains at least one ("novel"), the second half
    none. Spinel test formulas are drawn twice with two different inversion degrees.
    """
    rng = np.random.default_rng(seed)
    elements = sorted(set(A_POOL + B_POOL + ANIONS))
    pairs = list(itertools.combinations(elements, 2))
    held = {pairs[i] for i in rng.choice(len(pairs), int(heldout_share * len(pairs)), False)}
    train: list[ODM] = []
    while len(train) < n_train:
        s = _draw(rng)
        if not _pairs(s) & held:
            train.append(s)
    test: list[ODM] = []
    while len(test) < n_test:
        novel = len(test) < n_test // 2
        s = _draw(rng)
        if bool(_pairs(s) & held) != novel:
            continue
        s.info["novel_pair"] = novel
        test.append(s)
        if s.info["prototype"] == "spinel" and len(test) < n_test:
            test.append(_other_inversion(s, rng))
    seen = set().union(*(_pairs(s) for s in train))
    meta = {
        "n_heldout_pairs": len(held),
        "novel_share": float(np.mean([bool(_pairs(s) - seen) for s in test])),
    }
    return train, test, meta


def _other_inversion(s: ODM, rng: np.random.Generator) -> ODM:
    """The same spinel formula with a different inversion degree (same lattice draw rule)."""
    x_old = s.info["inversion"]
    x = float(rng.choice([v for v in INVERSION if v != x_old]))
    a_el, b_el = (e for e in _spinel_ab(s))
    x_el = next(e for e in s.info["elements"] if e in ANIONS)
    occ = [{a_el: 1 - x, b_el: x}, {a_el: x / 2, b_el: 1 - x / 2}, {x_el: 1.0}]
    occ = [{k: v for k, v in d.items() if v > 0} for d in occ]
    p = PROTOTYPES["spinel"]
    matrix, frac, orbit = _template("spinel")
    a = _lattice_constant(p, occ, rng)
    symbols = [e.symbol for e in s.species if e is not None]
    P = np.array([[occ[o].get(e, 0.0) for e in symbols] for o in orbit])
    out = ODM(P, list(s.species), frac.copy(), Lattice(matrix * a))
    out.info = {**s.info, "inversion": x}
    return out


def _spinel_ab(s: ODM) -> tuple[str, str]:
    _, _frac, orbit = _template("spinel")
    syms = [e.symbol if e is not None else None for e in s.species]
    x = s.info["inversion"]
    tet = s.P[np.where(orbit == 0)[0][0]]
    oct_ = s.P[np.where(orbit == 1)[0][0]]
    # A is the majority of the tetrahedral site when x < 1, else the minority octahedral one
    row = tet if x < 1 else -oct_
    cations = {k: e for k, e in enumerate(syms) if e is not None and e not in ANIONS}
    a = max(cations, key=lambda k: row[k])
    b = next(k for k in cations if k != a)
    return cations[a], cations[b]


def condition_of(odm: ODM) -> tuple[Composition, int, float]:
    """The generation condition ``(cell composition, n_sites, 1)`` of a crystal."""
    comp = Composition(
        {s: float(v) for s, v in zip(odm.species, odm.c, strict=False) if s is not None}
    )
    return comp, odm.n_sites, 1.0


def lattice_vector(lattice: Lattice) -> np.ndarray:
    """``(log a, log b, log c, alpha, beta, gamma)`` with angles in degrees."""
    return np.array([*np.log(lattice.abc), *lattice.angles], dtype=float)


@dataclass
class CrystalBatch:
    """Padded batch of B crystals on an ``(Nmax, Mmax)`` grid.

    Attributes:
        P: (B, Nmax, Mmax) occupancies; Z: their canonical coordinates (``canonicalize``).
        row_mask (B, Nmax), col_mask (B, Mmax): valid sites / species columns.
        r (B, Nmax), c (B, Mmax): marginals (0 on padding).
        atomic_numbers (B, Mmax): atomic number per column, 0 for vacancy and padding.
        frac (B, Nmax, 3): fractional coordinates; lattice (B, 6): ``lattice_vector``.
    """

    P: Tensor
    Z: Tensor
    row_mask: Tensor
    col_mask: Tensor
    r: Tensor
    c: Tensor
    atomic_numbers: Tensor
    frac: Tensor
    lattice: Tensor

    def __len__(self) -> int:
        return self.P.shape[0]

    def to(self, *args: object, **kwargs: object) -> CrystalBatch:
        """Move / cast every tensor (masks and atomic numbers keep their dtype)."""
        out = {}
        for k, v in self.__dict__.items():
            if v.is_floating_point():
                out[k] = v.to(*args, **kwargs)
            else:
                dev = kwargs.get(
                    "device", next((a for a in args if not isinstance(a, torch.dtype)), None)
                )
                out[k] = v.to(dev) if dev is not None else v
        return CrystalBatch(**out)

    def index(self, idx: Tensor | list[int]) -> CrystalBatch:
        """Sub-batch ``idx`` (a tensor or list of item indices)."""
        return CrystalBatch(**{k: v[idx] for k, v in self.__dict__.items()})


def collate_crystals(
    crystals: list[ODM] | list[tuple], eps: float = DEFAULT_EPS, dtype: torch.dtype = torch.float32
) -> CrystalBatch:
    """Pad a list of ODMs (or conditions ``(formula, n_sites, n_formula_units)``) into a batch.

    Conditions get the independence coupling ``r c^T / N`` as P, zero coordinates and a unit
    lattice: only their marginals, masks and species are meaningful.
    """
    if len(crystals) == 0:
        raise ValueError("collate_crystals needs at least one crystal")
    odms = [x if isinstance(x, ODM) else _condition_odm(*x) for x in crystals]
    B = len(odms)
    N = max(o.n_sites for o in odms)
    M = max(len(o.species) for o in odms)
    P = torch.zeros(B, N, M, dtype=torch.float64)
    rm = torch.zeros(B, N, dtype=torch.bool)
    cm = torch.zeros(B, M, dtype=torch.bool)
    r = torch.zeros(B, N, dtype=torch.float64)
    c = torch.zeros(B, M, dtype=torch.float64)
    zs = torch.zeros(B, M, dtype=torch.long)
    frac = torch.zeros(B, N, 3, dtype=torch.float64)
    lat = torch.zeros(B, 6, dtype=torch.float64)
    for b, o in enumerate(odms):
        n, m = o.P.shape
        P[b, :n, :m] = torch.from_numpy(o.P)
        rm[b, :n], cm[b, :m] = True, True
        r[b, :n] = 1.0
        c[b, :m] = torch.from_numpy(o.c)
        zs[b, :m] = torch.from_numpy(o.atomic_numbers)
        frac[b, :n] = torch.from_numpy(o.frac_coords % 1.0)
        lat[b] = torch.from_numpy(lattice_vector(o.lattice))
    Z = canonicalize(P, r, c, eps, rm, cm)
    return CrystalBatch(P.to(dtype), Z.to(dtype), rm, cm, r.to(dtype), c.to(dtype), zs,
                        frac.to(dtype), lat.to(dtype))  # fmt: skip


def _condition_odm(formula: str | Composition, n_sites: int, n_formula_units: float = 1) -> ODM:
    r, c, species = composition_to_marginals(formula, n_sites, n_formula_units)
    P = np.outer(r, c) / r.sum()
    return ODM(P, species, np.zeros((len(r), 3)), Lattice.cubic(1.0), c=c)


def from_cif(
    cif: str,
    occupancy_tolerance: float = 1.0,
    merge_close: bool = True,
    from_string: bool | None = None,
) -> list[ODM]:
    """ODMs of every structure in a CIF file (or CIF text when it contains a ``data_`` block).

    Uses pymatgen's ``CifParser`` (``occupancy_tolerance`` as there) and merges sites closer
    than 0.5 A into one candidate site when ``merge_close`` (with a ``UserWarning``).
    """
    from pymatgen.io.cif import CifParser

    is_text = ("data_" in cif) if from_string is None else bool(from_string)
    parser = (
        CifParser.from_str(cif, occupancy_tolerance=occupancy_tolerance)
        if is_text
        else CifParser(cif, occupancy_tolerance=occupancy_tolerance)
    )
    return [
        odm_from_structure(s, merge_close=merge_close)
        for s in parser.parse_structures(primitive=False)
    ]
