import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pymatgen
import pytest
from pymatgen.analysis.structure_matcher import StructureMatcher
from pymatgen.core import Lattice, Structure

from ep_flow import ODM, composition_to_marginals, make_disordered_dataset, make_splits
from ep_flow.metrics import OccupancyToleranceComparator, composition_match, occupancy_validity


def test_composition_to_marginals_vacancy_column():
    r, c, sp = composition_to_marginals("NaCl", 4, 1)
    assert sp[-1] is None
    assert np.isclose(c.sum(), 4)
    assert np.isclose(c[-1], 2)
    assert r.sum() == 4
    r, c, sp = composition_to_marginals("NaCl", 2, 1)
    assert None not in sp
    assert np.isclose(c.sum(), 2)
    with pytest.raises(ValueError, match="sum\\(c\\) > N"):
        composition_to_marginals("NaCl", 3, 2)


def test_dataset_is_feasible_and_mixed():
    data = make_disordered_dataset(200, seed=1)
    assert all(o.is_feasible(1e-12) and o.n_sites <= 16 for o in data)
    kinds = {o.info["disorder"] for o in data}
    assert {"ordered", "substitutional", "vacancy", "interstitial"} <= kinds
    valid, err = occupancy_validity(data)
    assert valid == 1.0
    assert err < 1e-12
    assert composition_match(data) == 1.0


def test_split_has_unseen_pairs():
    _train, test, meta = make_splits(300, 40, seed=0)
    assert meta["novel_share"] >= 0.5
    assert len(test) == 40


@pytest.mark.parametrize("seed", range(3))
def test_structure_round_trip_on_prototypes(seed):
    sm = StructureMatcher()
    for o in make_disordered_dataset(10, seed=seed):
        s = o.to_structure()
        back = ODM.from_structure(s).to_structure()
        assert back.composition.almost_equals(s.composition)
        assert sm.fit(s, back)


def test_li10gep2s12_round_trip():
    path = Path(next(iter(pymatgen.__path__))) / "util" / "structures" / "Li10GeP2S12.json"
    if not path.exists():
        pytest.skip("Li10GeP2S12 not shipped in this pymatgen")
    s = Structure.from_file(path)
    assert not s.is_ordered
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        odm = ODM.from_structure(s)
    assert odm.is_feasible(1e-9)
    back = odm.to_structure(drop_below=0.0)
    assert back.composition.almost_equals(s.composition)
    assert StructureMatcher(primitive_cell=False).fit(s, back)


class _FakeStructure(list):
    """Structure-like container that skips pymatgen's own occupancy validation."""

    def __init__(self, occupancies):
        super().__init__(SimpleNamespace(species=o,
                                         species_string=str(o)) for o in occupancies)  # fmt: skip
        n = len(occupancies)
        self.frac_coords = np.array([[i / n, 0, 0] for i in range(n)])
        self.lattice = Lattice.cubic(4.0 * n)
        self.distance_matrix = np.full((n, n), 4.0)


@pytest.mark.parametrize(
    ("occ", "match"),
    [
        ([{"Na": 1.0}, {"Cl": 0.7, "Br": 0.4}], "site 1 .* total occupancy 1.1"),
        ([{"Na": -0.1}], "site 0 .* occupancy -0.1"),
        ([{"Na": 1.0}, {"Cl": float("nan")}], "site 1 .* occupancy nan"),
    ],
)
def test_bad_occupancies_name_the_site(occ, match):
    with pytest.raises(ValueError, match=match):
        ODM.from_structure(_FakeStructure(occ))


def test_close_sites_warn_and_merge():
    s = Structure(Lattice.cubic(4.0), [{"Na": 0.5}, {"Na": 0.5}, "Cl"],
                  [[0, 0, 0], [0.05, 0, 0], [0.5, 0.5, 0.5]])  # fmt: skip
    with pytest.warns(UserWarning, match="positional"):
        kept = ODM.from_structure(s)
    assert kept.n_sites == 3
    with pytest.warns(UserWarning, match="merge"):
        merged = ODM.from_structure(s, merge_close=True)
    assert merged.n_sites == 2
    assert merged.is_feasible(1e-12)


def test_comparator_tolerance():
    rng = np.random.default_rng(0)
    o = make_disordered_dataset(30, seed=4)
    o = next(x for x in o if x.info["disorder"] == "substitutional")
    s = o.to_structure()
    noisy = s.copy()
    noisy.scale_lattice(s.volume * 1.03)
    coords = noisy.cart_coords + rng.normal(0, 0.05, (len(s), 3))
    noisy = Structure(noisy.lattice, noisy.species_and_occu, coords, coords_are_cartesian=True)
    sm = StructureMatcher(
        stol=0.5, ltol=0.3, angle_tol=10, comparator=OccupancyToleranceComparator(0.1)
    )
    assert sm.fit(s, noisy)
    P = o.P.copy()
    i = int(np.argmax((P > 0).sum(1)))
    k = np.nonzero(P[i])[0][:2]
    P[i, k[0]] -= 0.2
    P[i, k[1]] += 0.2
    changed = ODM(P, o.species, o.frac_coords, o.lattice).to_structure()
    assert not sm.fit(s, changed)


def _odm_args():
    from pymatgen.core import Element

    P = np.array([[0.5, 0.5, 0.0], [0.5, 0.0, 0.5], [0.0, 0.5, 0.5]])
    return P, [Element("Na"), Element("K"), None], np.zeros((3, 3)), Lattice.cubic(4.0)


def test_odm_accepts_a_feasible_matrix():
    P, sp, F, lat = _odm_args()
    odm = ODM(P, sp, F, lat, c=np.ones(3))
    assert odm.is_feasible(1e-12)
    # a baseline sample that misses the species totals by design is allowed when asked
    Pb = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.5, 0.5]])
    assert ODM(Pb, sp, F, lat, c=np.ones(3), check_columns=False).marginal_error() == 1.0


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda P, c: (np.full_like(P, np.nan), c), "9 non-finite entries .NaN or inf.; first at"),
        (lambda P, c: (np.where(P == 0.0, np.inf, P), c), "non-finite entries"),
        (lambda P, c: (P + np.array([[0.1, -0.1, 0], [0, 0, 0], [0, 0, 0]]), c),
         "column 0 .Na. of P sums to 1.1 but the formula gives c = 1"),
        (lambda P, c: (P - np.array([[0, 0, 0.2], [0, 0, 0], [0, 0, 0]]) + 0.2 * np.eye(3)[0], c),
         "negative occupancy -0.2 at site 0, species vacancy"),
        (lambda P, c: (P * 3, c), "site 0 has total occupancy 3; every row of P must sum to 1"),
        (lambda P, c: (P, np.array([1.0, 1.0, 1.5])), "c sums to 3.5 but the cell has N = 3"),
        (lambda P, c: (P, np.array([1.0, np.nan, 1.0])), "c must be finite and >= 0"),
        (lambda P, c: (P, np.array([2.0, -1.0, 2.0])), "c must be finite and >= 0"),
        (lambda P, c: (P, np.ones(2)), "c has shape .2,. but P has 3 species columns"),
        (lambda P, c: (P, np.array([1.5, 0.5, 1.0])),
         "column 0 .Na. of P sums to 1 but the formula gives c = 1.5"),
    ],
)  # fmt: skip
def test_odm_validates_on_construction(change, match):
    P, sp, F, lat = _odm_args()
    P2, c2 = change(P.copy(), np.ones(3))
    with pytest.raises(ValueError, match=match):
        ODM(P2, sp, F, lat, c=c2)


def test_odm_bad_shapes_and_tol():
    P, sp, F, lat = _odm_args()
    with pytest.raises(ValueError, match="species columns"):
        ODM(P, sp[:2], F, lat)
    with pytest.raises(ValueError, match="frac_coords has 2 rows but P has 3"):
        ODM(P, sp, F[:2], lat)
    with pytest.raises(ValueError, match="tol must be a finite number >= 0"):
        ODM(P, sp, F, lat, tol=float("nan"))


def test_site_metrics_need_an_assignment_and_info_is_metadata():
    from pymatgen.core import Element

    from ep_flow.metrics import site_occupancy_error, sparsity_recall

    true = ODM(np.ones((1, 1)), [Element("Li")], np.zeros((1, 3)), Lattice.cubic(4))
    empty = ODM(np.zeros((0, 1)), [Element("Li")], np.zeros((0, 3)), Lattice.cubic(4))
    for metric in (site_occupancy_error, sparsity_recall):
        with pytest.raises(ValueError, match="no finite site assignment"):
            metric(empty, true)
    assert true.info == {}  # a declared field, not shared between instances
    assert "prototype" in make_disordered_dataset(2, seed=0)[0].info
