import itertools
import pickle

import numpy as np
import pytest

from eva_cap import (
    AtomicEvent,
    EventRewards,
    EventSet,
    GrammarDecomposer,
    ParsedCaption,
    attribution_reward,
    completeness_reward,
    exact_similarity,
    match_events,
    sync_reward,
    trl_reward_funcs,
)
from eva_cap.synthetic import render_caption
from reference import best_matching_total

DEC = GrammarDecomposer()
GOLD = EventSet([
    AtomicEvent("visual", "man", "walk", t_start=0, t_end=4),
    AtomicEvent("audio", "dog", "bark", t_start=2, t_end=5),
    AtomicEvent("audiovisual", "woman", "speak", t_start=6, t_end=9),
    AtomicEvent("audio", "music", "music", t_start=10, t_end=12),
])  # fmt: skip
# "man walk" while "dog bark" then "woman speak" then "music"
PERFECT = render_caption(GOLD)


def score(c):
    return EventRewards(DEC).score(c, GOLD)


def test_perfect_caption_gets_every_reward():
    assert PERFECT == ("we see the man walk while we hear the dog bark then we see and hear the "
                       "woman speak then we hear music")  # fmt: skip
    r = score(PERFECT)
    assert r == {"completeness": 1.0, "attribution": 1.0, "sync": 1.0, "format": 1.0, "total": 3.0}


@pytest.mark.parametrize("caption", ["", "we see", "the dog barks loudly", "we see the cat run"])
def test_unparseable_caption_gets_zero(caption):
    assert all(v == 0.0 for v in score(caption).values())


def test_dropping_one_event_by_hand():
    # drop "dog bark": m = 3, n = 4; P = 1, R = 3/4 -> F1 = 6/7
    c = "we see the man walk then we see and hear the woman speak then we hear music"
    r = score(c)
    assert r["completeness"] == pytest.approx(6 / 7)
    assert r["attribution"] == pytest.approx(3 / 4)
    # O: pairs both matched (man,woman), (man,music), (woman,music), all in order: 3/6
    # J: adjacent gold pairs (0,1) and (1,2) involve the dropped event; (2,3) right: 1/3
    assert r["sync"] == pytest.approx((3 / 6 + 1 / 3) / 2)


def test_one_correct_clause_cannot_game_attribution_or_sync():
    r = score("we see the man walk")
    assert r["attribution"] == pytest.approx(1 / 4)
    assert r["sync"] == 0.0  # no pair of matched events
    assert r["completeness"] == pytest.approx(2 * 1 * 0.25 / 1.25)


def test_swapping_two_clauses_lowers_only_sync():
    c = ("we see and hear the woman speak then we see the man walk while we hear the dog bark "
         "then we hear music")  # fmt: skip
    r = score(c)
    assert r["completeness"] == 1.0
    assert r["attribution"] == 1.0
    assert r["sync"] < 1.0


def test_wrong_modality_lowers_only_attribution():
    c = PERFECT.replace("we see and hear the woman", "we see the woman")
    r = score(c)
    assert r["completeness"] == 1.0
    assert r["sync"] == 1.0
    assert r["attribution"] == pytest.approx(1 - 0.5 / 4)


def test_wrong_sound_source_costs_half_a_match():
    c = PERFECT.replace("the dog bark", "someone off-screen bark")
    r = score(c)
    assert r["attribution"] == pytest.approx(1 - 0.5 / 4)
    assert r["completeness"] == pytest.approx(3.5 / 4)


def test_single_event_sync_equals_completeness():
    g = EventSet([AtomicEvent("visual", "dog", "run", t_start=0, t_end=3)])
    p = DEC("we see the dog run then we see the car run")
    m = match_events(p.events, g.events)
    assert sync_reward(p, g, m) == completeness_reward(m) == pytest.approx(2 / 3)


def test_timestamps_sync_mode():
    g = EventSet([AtomicEvent("visual", "dog", "run", t_start=0, t_end=4),
                  AtomicEvent("audio", "car", "honk", t_start=4, t_end=6)])  # fmt: skip
    pe = (AtomicEvent("visual", "dog", "run", t_start=0, t_end=2),
          AtomicEvent("audio", "car", "honk", t_start=4, t_end=6))  # fmt: skip
    p = ParsedCaption(pe, (), True)
    m = match_events(pe, g.events)
    assert sync_reward(p, g, m, mode="timestamps") == pytest.approx((1 + (0.5 + 1) / 2) / 2)
    with pytest.raises(ValueError, match="mode"):
        sync_reward(p, g, m, mode="dtw")


def _random_events(rng, k):
    subs, acts = ["man", "dog", "car"], ["run", "bark", "honk"]
    mods = ["visual", "audio", "audiovisual"]
    return [AtomicEvent(mods[rng.integers(3)], subs[rng.integers(3)], acts[rng.integers(3)])
            for _ in range(k)]  # fmt: skip


def test_hungarian_equals_brute_force():
    rng = np.random.default_rng(0)
    for n, m in itertools.product(range(1, 6), range(1, 6)):
        for _ in range(3):
            gold, pred = _random_events(rng, n), _random_events(rng, m)
            sim = [[exact_similarity(p, g) for p in pred] for g in gold]
            assert match_events(pred, gold).total == pytest.approx(best_matching_total(sim))


def test_attribution_formula_on_a_matching():
    gold = [AtomicEvent("audio", "dog", "bark"), AtomicEvent("visual", "man", "run")]
    pred = [AtomicEvent("visual", "dog", "bark"), AtomicEvent("visual", "woman", "run")]
    m = match_events(pred, gold)
    assert attribution_reward(pred, gold, m) == pytest.approx((0.5 + 0.5) / 2)


def test_gate_versus_additive_format():
    bad = EventRewards(DEC, aggregation="additive").score("we see the man walk", GOLD)
    gated = EventRewards(DEC).score("we see the man walk", GOLD)
    assert bad["total"] == pytest.approx(1 + gated["total"])


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"weights": (1.0, 1.0)}, "weights must have 3"), ({"aggregation": "max"}, "aggregation"),
     ({"sync_mode": "x"}, "sync_mode")],
)  # fmt: skip
def test_event_rewards_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        EventRewards(DEC, **kw)


def test_batch_call_and_length_error():
    out = EventRewards(DEC)([PERFECT, ""], [GOLD, GOLD])
    np.testing.assert_array_equal(out["total"], [3.0, 0.0])
    with pytest.raises(ValueError, match="2 captions but 1"):
        EventRewards(DEC)([PERFECT, ""], [GOLD])


def test_trl_calling_convention():
    (total,) = trl_reward_funcs(DEC)
    comps = trl_reward_funcs(DEC, components=True)
    gold_json = [GOLD.to_json(), GOLD.to_json(), None]
    completions = [PERFECT, [{"role": "assistant", "content": PERFECT}], PERFECT]
    kw = {"prompts": ["p"] * 3, "completions": completions, "completion_ids": [[1]] * 3,
          "gold_events": gold_json, "trainer_state": object(), "log_extra": None,
          "log_metric": None, "other_column": [1, 2, 3]}  # fmt: skip
    assert total(**kw) == [3.0, 3.0, None]
    assert [f(**kw)[0] for f in comps] == [1.0, 1.0, 1.0, 1.0]
    assert total(prompts=None, completions=[PERFECT]) == [None]
    again = pickle.loads(pickle.dumps(total))
    assert again(completions=[PERFECT], gold_events=[GOLD.to_json()]) == [3.0]
