import numpy as np
import pytest

from eva_cap import (
    AtomicEvent,
    EventSet,
    GrammarDecomposer,
    LLMDecomposer,
    Relation,
    relations_from_caption_order,
    relations_from_intervals,
)
from eva_cap.synthetic import AVWorld, render_caption


@pytest.mark.parametrize(
    ("kw", "match"),
    [({"modality": "smell"}, "modality must be one of"), ({"subject": " "}, "subject"),
     ({"action": ""}, "action"), ({"t_start": 3, "t_end": 1}, "t_end must be >= t_start")],
)  # fmt: skip
def test_bad_events(kw, match):
    base = {"modality": "visual", "subject": "dog", "action": "run"}
    with pytest.raises(ValueError, match=match):
        AtomicEvent(**{**base, **kw})


def test_interval():
    assert AtomicEvent("visual", "dog", "run", t_start=1, t_end=2.5).interval() == (1, 2.5)
    for kw in ({}, {"t_start": 1}, {"t_end": 2}):
        with pytest.raises(ValueError, match="has no interval: t_start and t_end must both"):
            AtomicEvent("visual", "dog", "run", **kw).interval()


def test_relations():
    evs = [AtomicEvent("visual", "a", "x", t_start=0, t_end=3),
           AtomicEvent("visual", "b", "x", t_start=2, t_end=4),
           AtomicEvent("visual", "c", "x", t_start=4, t_end=6)]  # fmt: skip
    assert relations_from_intervals(evs) == [Relation.OVERLAP, Relation.BEFORE]
    assert relations_from_caption_order(["while", "Then"]) == [Relation.OVERLAP, Relation.BEFORE]
    with pytest.raises(ValueError, match="unknown connective"):
        relations_from_caption_order(["because"])
    with pytest.raises(ValueError, match="timestamps"):
        relations_from_intervals([AtomicEvent("visual", "a", "x")] * 2)


def test_eventset_sorting_json_and_errors():
    es = EventSet([AtomicEvent("audio", "dog", "bark", t_start=5, t_end=6),
                   AtomicEvent("visual", "man", "run", t_start=1, t_end=3)])  # fmt: skip
    assert [e.subject for e in es] == ["man", "dog"]
    assert EventSet.coerce(es.to_json()) == es
    with pytest.raises(ValueError, match="explicit relations"):
        EventSet([AtomicEvent("visual", "a", "x"), AtomicEvent("visual", "b", "x")])
    with pytest.raises(ValueError, match="relations must have"):
        EventSet([AtomicEvent("visual", "a", "x")], ["before"])


def test_grammar_round_trip_on_1000_clips():
    dec = GrammarDecomposer()
    for clip in AVWorld(7).sample(1000):
        p = dec(render_caption(clip.events))
        assert p.ok
        assert p.events == tuple(e.without_time() for e in clip.events)
        assert p.relations == clip.events.relations


def test_llm_decomposer_valid_and_invalid_output():
    good = ('Sure: {"events": [{"modality": "audio", "subject": "dog", "action": "bark"}, '
            '{"modality": "visual", "subject": "man", "action": "run"}], '
            '"relations": ["overlap"]} done')  # fmt: skip
    p = LLMDecomposer(lambda prompt: [{"generated_text": good}])("a dog barks as a man runs")
    assert p.ok
    assert p.relations == (Relation.OVERLAP,)
    assert p.events[1].subject == "man"
    timed = (
        '[{"modality": "visual", "subject": "a", "action": "x", "t_start": 0, "t_end": 2}, '
        '{"modality": "visual", "subject": "b", "action": "y", "t_start": 1, "t_end": 3}]'
    )
    assert LLMDecomposer(lambda s: timed)("c").relations == (Relation.OVERLAP,)
    for bad in ["no json here", "{", '{"events": []}', '[{"modality": "smell", "subject": "a", '
                '"action": "b"}]', '{"events": [{"subject": "a"}]}', '[1, 2]',
                '{"events": [{"modality": "visual", "subject": "a", "action": "b"}], '
                '"relations": ["before"]}']:  # fmt: skip
        assert not LLMDecomposer(lambda s, b=bad: b)("caption").ok, bad


def test_llm_decomposer_argument_errors():
    with pytest.raises(TypeError, match="callable"):
        LLMDecomposer("gpt")
    with pytest.raises(ValueError, match="caption"):
        LLMDecomposer(lambda s: s, prompt_template="no field")


def test_world_is_deterministic_and_validated():
    a, b = AVWorld(3).sample(5), AVWorld(3).sample(5)
    for x, y in zip(a, b, strict=False):
        np.testing.assert_array_equal(x.visual, y.visual)
        assert x.events == y.events
        assert x.web_caption == y.web_caption
    assert all(2 <= len(c.events) <= 5 for c in a)
    assert a[0].visual.shape == (16, 32)
    with pytest.raises(ValueError, match="T must be"):
        AVWorld(T=2)
    with pytest.raises(ValueError, match="min_events"):
        AVWorld(min_events=3, max_events=2)


def test_web_caption_biases_match_their_rates():
    clips = AVWorld(11).sample(3000)
    n_audio = kept_audio = n_av = av_as_vis = 0
    dec = GrammarDecomposer()
    for c in clips:
        described = dec(c.web_caption).events
        keys = {(e.subject, e.action): e.modality for e in described}
        for e in c.events:
            if e.modality == "audio":
                n_audio += 1
                kept_audio += (e.subject, e.action) in keys
            if e.modality == "audiovisual":
                n_av += 1
                av_as_vis += keys.get((e.subject, e.action)) == "visual"
    # binomial standard errors are below 0.01 here; tolerance 0.03
    assert 1 - kept_audio / n_audio == pytest.approx(0.4, abs=0.03)
    assert av_as_vis / n_av == pytest.approx(0.5, abs=0.03)
