"""Population level: lifecycle bounds, fork, merge, prune, seed; metrics on hand-built data."""

import math

import numpy as np
import pytest

from evochamber import EvoChamber, EvoConfig, Insight, Lifecycle, NicheWorld, Population, SimPolicy
from evochamber.lifecycle import fork_agent, merge_agents
from evochamber.metrics import (
    n_stable_specialists,
    niche_coverage,
    specialization_index,
    stable_specialists,
)


def test_bounds_hold_through_a_run_and_pruned_agents_never_return():
    world = NicheWorld()
    cfg = EvoConfig(n_agents=14, n_min=8, n_max=16, period=25, min_age=25)
    eng = EvoChamber(SimPolicy(world), cfg, seed=3)
    dead = set()
    for task in world.make_stream(500, seed=3):
        rec = eng.step(task)
        assert cfg.n_min <= len(eng.population) <= cfg.n_max
        assert not set(rec["team"]) & dead
        dead |= {a.agent_id for a in eng.population.retired}
    kinds = {e["kind"] for e in eng.log.events}
    assert {"prune", "seed"} <= kinds, kinds


def _agent_with(pop_ids, items):
    from evochamber import Agent, MemoryArchive

    a = Agent(pop_ids, archive=MemoryArchive(4))
    for it in items:
        a.archive.add(it, 0)
    return a


def test_fork_copies_archive_and_lineage():
    p = _agent_with(
        "a00", [Insight(f"i{j}", "n0", "x", quality=0.9, key=f"k{j}") for j in range(3)]
    )
    p.competence, p.counts, p.lineage = {"n0": 0.9}, {"n0": 40}, ["root"]
    c = fork_agent(p, "a07", 100)
    assert [i.to_dict() for i in c.archive.items] == [i.to_dict() for i in p.archive.items]
    assert c.archive is not p.archive
    assert c.archive.items[0] is not p.archive.items[0]
    assert c.lineage == ["root", "a00"]
    assert c.counts == {}
    assert c.born_t == 100
    assert c.c("n0") == pytest.approx(0.7)  # halved toward 0.5


def test_merge_is_a_capped_subset_of_the_union():
    rng = np.random.default_rng(0)
    for trial in range(20):
        a = _agent_with("a", [Insight(f"a{j}", "n0", "x", quality=float(rng.random()),
                                      key=f"k{rng.integers(6)}") for j in range(4)])  # fmt: skip
        b = _agent_with("b", [Insight(f"b{j}", "n0", "x", quality=float(rng.random()),
                                      key=f"k{rng.integers(6)}") for j in range(4)])  # fmt: skip
        a.competence, b.competence = {"n0": 0.3, "n1": 0.8}, {"n0": 0.6}
        m = merge_agents(a, b, f"m{trial}", 10)
        union = {i.id for i in a.archive.items + b.archive.items}
        assert {i.id for i in m.archive.items} <= union
        assert len(m.archive) <= 4
        assert m.competence == {"n0": 0.6, "n1": 0.8}
        assert m.lineage[-2:] == ["a", "b"]


def test_lifecycle_operators_one_by_one(make_pop):
    C = [[0.9, 0.2], [0.1, 0.1], [0.5, 0.5], [0.45, 0.4], [0.5, 0.3]]
    N = [[50, 5], [30, 30], [10, 10], [10, 10], [10, 10]]
    pop = make_pop(C, N, n_min=3, n_max=8)
    lc = Lifecycle(period=10, min_age=0, merge=False, fork=False, seed=False)
    ev = lc.step(pop, 200)
    assert [e.kind for e in ev] == ["prune"]
    assert ev[0].agents == ["a01"]
    lc = Lifecycle(period=10, prune=False, merge=False, seed=False)
    lc.recent = ["n0"] * 10
    ev = lc.step(pop, 210)
    assert [e.kind for e in ev] == ["fork"]
    assert pop.get(ev[0].result).lineage == ["a00"]
    lc = Lifecycle(prune=False, merge=False, fork=False, cover_c=0.95)
    ev = lc.step(pop, 220)
    assert {e.niche for e in ev} == {"n0", "n1"}
    assert all(e.kind == "seed" for e in ev)


def test_specialization_index_extremes():
    assert specialization_index([[1, 1, 1, 1], [2, 2, 2, 2]]) == pytest.approx(0.0)
    assert specialization_index([[0, 5, 0], [3, 0, 0]]) == pytest.approx(1.0)
    assert math.isnan(specialization_index([[0, 0, 0]]))


def _steps(spec):
    return [{"niche": k, "anchor": a} for k, a in spec]


def test_stable_specialists_on_a_hand_built_trajectory():
    steps = _steps(
        [("n0", "a1")] * 6 + [("n0", "a2")] * 4  # a1 anchors 60 % of 10 n0 tasks
        + [("n1", "a3")] * 5 + [("n1", "a4")] * 5  # tie at 50 %: one specialist, lower id
        + [("n2", "a5")] * 9  # 9 tasks < 10: no specialist
        + [("n3", "a1")] * 10  # a1 again: counted once
        + [("n4", "a6")] * 4 + [("n4", "a7")] * 3 + [("n4", "a8")] * 3  # 40 %: none
    )  # fmt: skip
    assert stable_specialists(steps, window=0) == {"n0": "a1", "n1": "a3", "n3": "a1"}
    assert n_stable_specialists(steps, window=0) == 2
    assert n_stable_specialists(steps[-10:], window=10) == 0  # only the n4 tasks left


def test_niche_coverage(make_pop):
    pop = make_pop([[0.9, 0.1], [0.2, 0.3]], [[1, 1], [1, 1]])
    assert niche_coverage(pop) == 0.5
    assert math.isnan(niche_coverage(Population.blank(2)))


def test_bad_population_inputs():
    with pytest.raises(ValueError, match=r"n_min \(5\) must be <= n_max \(3\)"):
        Population.blank(3, n_min=5, n_max=3)
    with pytest.raises(ValueError, match=r"period must be an int in \[1, inf\)"):
        Lifecycle(period=0)


def test_coverage_starts_below_threshold_and_seeds_an_unanswered_niche():
    """Issue 43: blank agents sit at the 0.5 prior, which is not coverage."""
    pop = Population.blank(4, n_min=2, n_max=6)
    for k in ("n0", "n1"):
        pop.see(k)
    assert niche_coverage(pop) == 0.0
    ev = Lifecycle(prune=False, merge=False, fork=False).step(pop, 50)
    assert [(e.kind, e.niche) for e in ev] == [("seed", "n0"), ("seed", "n1")]
    a = pop.agents[0]
    a.update_competence("n0", 1.0, 0.15)
    assert a.covers("n0")
    assert not a.covers("n1")
    assert niche_coverage(pop) == 0.5


def test_fork_has_no_cooldown_by_default():
    assert EvoConfig().fork_cooldown == 0
    assert Lifecycle().fork_cooldown == 0
