"""Team level: UCB anchor, supplement, scout, Thompson sampling, random teams."""

import numpy as np
import pytest

from evochamber import (
    FixedStructureSelector,
    NicheTeamAssembler,
    RandomTeamAssembler,
    Structure,
    ThompsonStructureSelector,
)
from evochamber.team import AnchorChoiceSelector
from reference import ucb


def test_ucb_anchor_matches_hand_computation(make_pop):
    C = [[0.9], [0.6], [0.5]]
    N = [[40], [2], [0]]
    pop = make_pop(C, N)
    asm = NicheTeamAssembler(beta=0.3, size=1)
    t = 100
    scores = asm.anchor_scores(pop.agents, "n0", t)
    want = [ucb(0.9, 40, t, 0.3), ucb(0.6, 2, t, 0.3), ucb(0.5, 0, t, 0.3)]
    np.testing.assert_allclose(scores, want, rtol=0, atol=1e-15)
    # 0.9 + 0.3 sqrt(ln 101 / 41) = 1.0007; 0.6 + 0.3 sqrt(ln 101 / 3) = 0.9721;
    # 0.5 + 0.3 sqrt(ln 101) = 1.1445: the never-tried agent anchors
    team = asm.assemble(pop, "n0", t, np.random.default_rng(0))
    assert team[0].agent_id == "a02"
    assert [round(s, 4) for s in scores] == [1.0007, 0.9721, 1.1445]


def test_anchor_ties_are_broken_by_the_seeded_generator(make_pop):
    pop = make_pop([[0.5]] * 6, [[0]] * 6)
    asm = NicheTeamAssembler(size=1)
    got = {asm.assemble(pop, "n0", 5, np.random.default_rng(s))[0].agent_id for s in range(40)}
    assert len(got) > 3  # every tied agent can be drawn
    a = [asm.assemble(pop, "n0", 5, np.random.default_rng(7))[0].agent_id for _ in range(3)]
    assert len(set(a)) == 1  # same seed, same anchor


def test_supplement_trades_competence_for_diversity_and_scout_is_underused(make_pop):
    from evochamber import Insight

    C = [[0.9, 0.5], [0.8, 0.5], [0.75, 0.5], [0.3, 0.5], [0.2, 0.5]]
    N = [[50, 1], [30, 1], [30, 1], [0, 1], [1, 1]]
    pop = make_pop(C, N)
    for aid, niche in (("a00", "n0"), ("a01", "n0"), ("a02", "n1")):
        pop.get(aid).archive.add(Insight(f"x{aid}", niche, "t", quality=0.9), 0)
    asm = NicheTeamAssembler(beta=0.0, gamma=0.2, size=3)
    team = asm.assemble(pop, "n0", 10, np.random.default_rng(0))
    # a01: 0.8 - 0.2*cos=1 -> 0.6 ; a02: 0.75 - 0 -> 0.75 (different profile wins)
    assert [a.agent_id for a in team[:2]] == ["a00", "a02"]
    med = np.median([50, 30, 30, 0, 1])
    assert team[2].n("n0") <= med
    assert team[2].agent_id in {"a03", "a04"}


def test_thompson_reproduces_hand_draws():
    sel = ThompsonStructureSelector()
    for _ in range(3):
        sel.update("n0", Structure.VOTE, True)
    sel.update("n0", Structure.DEBATE, False)
    sel.update("n0", Structure.DEBATE, None)  # unknown outcome: no update
    post = sel.posterior("n0")
    assert post["VOTE"] == [4.0, 1.0]
    assert post["DEBATE"] == [1.0, 2.0]
    rng, ref = np.random.default_rng(3), np.random.default_rng(3)
    got = sel.select("n0", [], rng)
    draws = [ref.beta(*post[s.name]) for s in Structure]
    assert got is list(Structure)[int(np.argmax(draws))]
    picks = [sel.select("n0", [], np.random.default_rng(s)) for s in range(400)]
    # P(VOTE wins) under Beta(4,1) vs three others: well above a uniform 1/4
    assert picks.count(Structure.VOTE) / 400 > 0.5


def test_fixed_and_anchor_choice_selectors():
    fixed = FixedStructureSelector("pipeline")
    assert fixed.select("n0", [], np.random.default_rng(0)) is Structure.PIPELINE
    sel = AnchorChoiceSelector(lambda anchor, summary: "I pick DEBATE.")
    assert sel.select("n0", [None], np.random.default_rng(0)) is Structure.DEBATE
    junk = AnchorChoiceSelector(lambda anchor, summary: "no idea")
    assert junk.select("n0", [None], np.random.default_rng(0)) in list(Structure)
    assert "successes" in sel.summary("n0")


def test_random_teams_are_uniform(make_pop):
    pop = make_pop([[0.9]] + [[0.1]] * 4, [[50]] + [[5]] * 4)
    asm = RandomTeamAssembler(size=1)
    anchors = [asm.assemble(pop, "n0", 0, np.random.default_rng(s))[0].agent_id for s in range(500)]
    assert abs(anchors.count("a00") / 500 - 0.2) < 4 * np.sqrt(0.2 * 0.8 / 500)


def test_bad_team_inputs(make_pop):
    with pytest.raises(ValueError, match=r"team size must be an integer in 1\.\.5"):
        NicheTeamAssembler(size=0)
    with pytest.raises(ValueError, match=r"team size must be an integer in 1\.\.5"):
        NicheTeamAssembler(size=6)
    pop = make_pop([[0.5]] * 2, [[0]] * 2)
    with pytest.raises(ValueError, match="exceeds the population size 2"):
        NicheTeamAssembler(size=3).assemble(pop, "n0", 0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="unknown structure 'chorus'"):
        Structure.parse("chorus")
