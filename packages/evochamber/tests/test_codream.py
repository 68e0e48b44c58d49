"""CoDream: the routing rule against brute force, donors, the specialist guard, the modes."""

import numpy as np
import pytest

from evochamber import CoDream, Insight, Task, TeamOutcome, plan_routing
from evochamber.policies.base import BasePolicy
from reference import route_brute_force


class OneInsightPolicy(BasePolicy):
    """Reflect / cross-examine / distill with one call each; distills ``self.out``."""

    def __init__(self, out):
        super().__init__()
        self.out = out

    def reflect(self, agent, task, outcome, ctx):
        self.calls += 1

    def cross_examine(self, team, task, outcome, reflections, ctx):
        self.calls += 1

    def distill(self, team, task, outcome, reflections, critique, ctx):
        self.calls += 1
        return [i.copy() for i in self.out]


FAIL = TeamOutcome("x", {}, False, False, 1)


def _random_case(rng, n=9, K=3):
    C = rng.random((n, K)).round(2).tolist()
    N = rng.integers(0, 3, (n, K)).tolist()
    team = sorted(rng.choice(n, size=3, replace=False).tolist())
    return C, N, team, int(rng.integers(K))


@pytest.mark.parametrize("seed", range(30))
def test_recipients_equal_brute_force(seed, make_pop):
    rng = np.random.default_rng(seed)
    C, N, team_idx, k = _random_case(rng)
    pop = make_pop(C, N)
    team = [pop.agents[i] for i in team_idx]
    plan = plan_routing(pop, team, f"n{k}", guard=0.7)
    donors, rec = route_brute_force(C, N, team_idx, k, 0.7)
    assert set(plan.recipients) == {f"a{i:02d}" for i in rec}
    assert set(plan.donors) == {f"a{i:02d}" for i in donors}
    assert not set(plan.donors) & set(plan.recipients)  # donors never receive


@pytest.mark.parametrize("seed", range(10))
def test_held_knowledge_reaches_exactly_the_recipients(seed, make_pop):
    rng = np.random.default_rng(100 + seed)
    plan = None
    while plan is None or plan.cold_start:  # redraw until the case has a donor
        C, N, team_idx, k = _random_case(rng)
        pop = make_pop(C, N)
        team = [pop.agents[i] for i in team_idx]
        plan = plan_routing(pop, team, f"n{k}")
    donor = plan.donors[0]
    held = Insight("h", f"n{k}", "known trick", source=f"agent:{donor}", quality=0.9, key="h")
    rep = CoDream(OneInsightPolicy([held]), donor_notes=False).run(team, Task("t", f"n{k}", "p"),
                                                                   FAIL, pop, 0)  # fmt: skip
    assert set(rep.recipients) == set(plan.recipients)
    assert not set(rep.recipients) & set(plan.donors)


def test_specialist_guard_and_new_lessons(make_pop):
    # a00 strong on n0 (donor); a01 weak on n0; a02 weak on n0 but a specialist of n1 (0.8)
    C = [[0.9, 0.5], [0.2, 0.5], [0.1, 0.8], [0.5, 0.5]]
    N = [[10, 0], [10, 0], [10, 20], [10, 0]]
    pop = make_pop(C, N)
    team = pop.agents[:3]
    plan = plan_routing(pop, team, "n0", guard=0.7)
    assert plan.donors == ["a00"]
    assert plan.recipients == ["a01"]
    assert plan.guarded == ["a02"]
    new = Insight("n", "n0", "new lesson", source="codream", quality=0.8, key="new")
    rep = CoDream(OneInsightPolicy([new])).run(team, Task("t", "n0", "p"), FAIL, pop, 0)
    assert rep.recipients == ["a00", "a01"]  # every member but the guarded specialist
    assert rep.calls == 3 + 2  # reflect x members, cross-examine, distill


def test_cold_start_gives_to_every_member(make_pop):
    pop = make_pop([[0.5]] * 4, [[0]] * 4)
    new = Insight("n", "n0", "lesson", quality=0.8)
    rep = CoDream(OneInsightPolicy([new])).run(pop.agents[:3], Task("t", "n0", "p"), FAIL, pop, 0)
    assert rep.recipients == ["a00", "a01", "a02"]
    assert rep.donors == []


def test_broadcast_self_off(make_pop):
    C = [[0.9], [0.2], [0.1], [0.5], [0.4]]
    pop = make_pop(C, [[5]] * 5)
    team = pop.agents[:3]
    new = Insight("n", "n0", "lesson", quality=0.8)
    task = Task("t", "n0", "p")
    b = CoDream(OneInsightPolicy([new]), routing="broadcast").run(team, task, FAIL, pop, 0)
    assert b.recipients == [a.agent_id for a in pop.agents]
    s = CoDream(OneInsightPolicy([new]), routing="self").run(team, task, FAIL, pop, 0)
    assert s.recipients == ["a00"]
    o = CoDream(OneInsightPolicy([new]), routing="off").run(team, task, FAIL, pop, 0)
    assert not o.fired
    assert o.recipients == []


def test_trigger_rules(make_pop):
    cd = CoDream(OneInsightPolicy([]))
    ok_agree = TeamOutcome("a", {"x": "a", "y": "a"}, True, False, 1)
    ok_split = TeamOutcome("a", {"x": "a", "y": "b"}, True, True, 1)
    unknown_split = TeamOutcome("a", {"x": "a", "y": "b"}, None, True, 1)
    assert cd.mode(FAIL) == "full"
    assert cd.mode(ok_agree) is None
    assert cd.mode(ok_split) == "dissent"
    assert cd.mode(unknown_split) == "full"
    assert CoDream(None, trigger="failure_or_disagreement").mode(ok_split) == "full"
    pop = make_pop([[0.2], [0.9], [0.1]], [[5]] * 3)
    new = Insight("n", "n0", "lesson", quality=0.8)
    team = pop.agents
    split = TeamOutcome("a", {"a00": "a", "a01": "a", "a02": "b"}, True, True, 1)
    rep = CoDream(OneInsightPolicy([new])).run(team, Task("t", "n0", "p"), split, pop, 0)
    assert rep.recipients == ["a02"]  # only the dissenter


def test_codream_counts_members_plus_two_calls(make_pop):
    pop = make_pop([[0.5]] * 3, [[1]] * 3)
    pol = OneInsightPolicy([])
    rep = CoDream(pol).run(pop.agents, Task("t", "n0", "p"), FAIL, pop, 0)
    assert rep.calls == len(pop.agents) + 2


def test_bad_codream_inputs():
    with pytest.raises(ValueError, match="unknown routing 'gossip'"):
        CoDream(None, routing="gossip")
    with pytest.raises(ValueError, match="unknown route_scope"):
        CoDream(None, route_scope="world")
    with pytest.raises(ValueError, match=r"max_insights must be an int in \[1, inf\)"):
        CoDream(None, max_insights=0)


def test_cold_start_when_no_answered_agent_sits_below_the_median(make_pop):
    """Issue 43: one agent answered n0 (c = 0.4); every other agent sits at the 0.5 prior.

    No agent that answered n0 is below the median, so there is no weak side to route to: the
    spec's cold start gives the holder's knowledge to every other member (the old rule gave
    it to nobody, since the unanswered members at 0.5 counted as donors).
    """
    pop = make_pop([[0.4], [0.5], [0.5], [0.5]], [[3], [0], [0], [0]])
    team = pop.agents[:3]
    plan = plan_routing(pop, team, "n0")
    assert plan.cold_start
    held = Insight("h", "n0", "trick", source="agent:a00", quality=0.9, key="h")
    rep = CoDream(OneInsightPolicy([held])).run(team, Task("t", "n0", "p"), FAIL, pop, 0)
    assert rep.recipients == ["a01", "a02"]


def test_cold_start_is_rare_once_the_niche_has_a_gradient(make_pop):
    pop = make_pop([[0.9], [0.2], [0.6], [0.4]], [[5], [5], [5], [5]])
    plan = plan_routing(pop, pop.agents[:3], "n0")
    assert not plan.cold_start
    assert plan.donors == ["a00", "a02"]
    assert plan.recipients == ["a01"]
