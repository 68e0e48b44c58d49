"""Individual level: EWMA competence, the archive (capacity, value, eviction, protection)."""

import math

import numpy as np
import pytest

from evochamber import Agent, Insight, MemoryArchive
from reference import ewma, value


def ins(i, niche="n0", q=0.5, t=0, key=None, kind="strategy"):
    return Insight(f"i{i}", niche, f"text {i}", kind=kind, quality=q, t_created=t, key=key)


def test_ewma_matches_hand_values():
    a = Agent("a")
    assert a.update_competence("n0", 1.0, 0.15) == pytest.approx(0.575)  # 0.85*0.5 + 0.15
    assert a.update_competence("n0", 0.0, 0.15) == pytest.approx(0.48875)  # 0.85*0.575
    assert a.n("n0") == 2
    out = [1, 0, 1, 1, 0, 0, 1]
    b = Agent("b")
    for s in out:
        b.update_competence("n1", s, 0.3)
    assert b.c("n1") == pytest.approx(ewma(0.5, out, 0.3), abs=1e-15)


def test_value_definition():
    a = MemoryArchive(4, tau=300)
    it = ins(0, q=0.8, t=10)
    assert a.value(it, 310) == pytest.approx(value(0.8, 310, 10, 300))
    assert a.value(it, 310) == pytest.approx(0.8 / math.e)


@pytest.mark.parametrize("seed", range(8))
def test_size_never_exceeds_capacity_random_sequences(seed):
    rng = np.random.default_rng(seed)
    cap = int(rng.integers(1, 6))
    a = MemoryArchive(cap, tau=float(rng.uniform(5, 500)))
    for i in range(200):
        t = i
        key = f"k{rng.integers(15)}" if rng.random() < 0.7 else None
        a.add(ins(i, f"n{rng.integers(3)}", float(rng.random()), t, key), t,
              protect=f"n{rng.integers(3)}" if rng.random() < 0.5 else None)  # fmt: skip
        assert len(a) <= cap
        keys = [it.key for it in a.items if it.key is not None]
        assert len(keys) == len(set(keys))


def test_eviction_order_follows_value():
    a = MemoryArchive(3, tau=100)
    a.add(ins(1, q=0.9, t=0), 0)  # value at t=100: 0.9/e = 0.331
    a.add(ins(2, q=0.5, t=90), 90)  # 0.5*exp(-0.1) = 0.452
    a.add(ins(3, q=0.4, t=100), 100)  # 0.4
    vals = {it.id: value(it.quality, 100, it.t_used, 100) for it in a.items}
    order = sorted(vals, key=vals.get)
    got = []
    for _ in range(3):
        got.append(a.evict(100).id)
    assert got == order == ["i1", "i3", "i2"]


def test_protected_top_niche_survives_lower_value_offniche_inserts():
    a = MemoryArchive(3)
    for i in range(3):
        a.add(ins(i, "top", q=0.3), 0, protect="top")
    a.add(ins(9, "other", q=0.9), 0, protect="top")  # higher value, but all others protected
    assert {it.niche for it in a.items} == {"top", "other"}  # one top item had to go
    b = MemoryArchive(3)
    b.add(ins(0, "top", q=0.9), 0, protect="top")
    b.add(ins(1, "x", q=0.6), 0, protect="top")
    b.add(ins(2, "x", q=0.6), 0, protect="top")
    for i in range(3, 20):
        b.add(ins(i, "y", q=0.5), 0, protect="top")  # lower than everything held
    assert [it.id for it in b.items] == ["i0", "i1", "i2"]
    b.add(ins(30, "y", q=0.7), 0, protect="top")  # beats an off-niche item, not the top one
    assert "i0" in [it.id for it in b.items]
    assert "i30" in [it.id for it in b.items]


def test_same_key_refreshes_instead_of_duplicating():
    a = MemoryArchive(4)
    a.add(ins(0, q=0.4, key="s"), 0)
    a.add(ins(1, q=0.7, key="s"), 5)
    assert len(a) == 1
    assert a.items[0].quality == 0.7
    assert a.items[0].t_used == 5


def test_retrieve_by_niche_and_cross_domain_and_roundtrip():
    a = MemoryArchive(5)
    a.add(ins(0, "n0", 0.9), 0)
    a.add(ins(1, "n1", 0.9), 0)
    a.add(ins(2, "*", 0.2), 0)
    got = a.retrieve("n0", 5, t=3)
    assert [g.id for g in got] == ["i0", "i2"]
    assert all(g.t_used == 3 for g in got)
    b = MemoryArchive.from_dict(a.to_dict())
    assert [it.to_dict() for it in b.items] == [it.to_dict() for it in a.items]


def test_bad_archive_inputs():
    with pytest.raises(ValueError, match=r"capacity must be an int in \[1, inf\), got 0"):
        MemoryArchive(0)
    with pytest.raises(ValueError, match=r"tau must be in \(0\.0, inf\), got 0"):
        MemoryArchive(2, tau=0)
    with pytest.raises(ValueError, match="kind must be one of"):
        Insight("i", "n0", "x", kind="rumour")
