"""Issue 41: every bad input gives a ValueError/TypeError naming the argument; progress bars."""

import io
import sys

import pytest
import torch

from eva_cap import (
    AtomicEvent,
    EventRewards,
    EventSet,
    GrammarDecomposer,
    GRPOConfig,
    GRPOTrainer,
    eva_cap_train,
    evaluate_captions,
    group_advantages,
    grpo_token_loss,
    grpo_train,
    match_events,
    parse_rate,
    quality_control,
    sft_train,
    trl_reward_funcs,
)
from eva_cap.synthetic import AVWorld, TinyAVCaptioner, WordTokenizer, collate

NAN, INF = float("nan"), float("inf")
MAN = AtomicEvent("visual", "man", "walk", t_start=0, t_end=4)
DOG = AtomicEvent("audio", "dog", "bark", t_start=2, t_end=5)
GOLD = EventSet([MAN, DOG])
CAP = "we see the man walk while we hear the dog bark"
DEC = GrammarDecomposer()


@pytest.mark.parametrize(
    ("weights", "err", "match"),
    [
        ((-1.0, 1.0, 1.0), ValueError, r"weights\[0\] must be in \[0\.0, inf\), got -1\.0"),
        ((1.0, NAN, 1.0), ValueError, r"weights\[1\] must be finite"),
        ((1.0, 1.0, INF), ValueError, r"weights\[2\] must be finite"),
        (("a", 1.0, 1.0), TypeError, r"weights\[0\] must be a real number"),
        ((0.0, 0.0, 0.0), ValueError, "weights are all zero"),
        ((1.0, 1.0), ValueError, "weights must have 3 entries"),
        (1.0, TypeError, "weights must be a sequence of 3 numbers"),
    ],
)
def test_reward_weights(weights, err, match):
    with pytest.raises(err, match=match):
        EventRewards(DEC, weights=weights)
    with pytest.raises(err, match=match):
        trl_reward_funcs(DEC, weights=weights)


def test_reward_weights_nan_never_reaches_the_total():
    with pytest.raises(ValueError, match="finite"):
        EventRewards(DEC, weights=(NAN, 1.0, 1.0)).score(CAP, GOLD)


def test_rewards_need_callables():
    with pytest.raises(TypeError, match="decomposer must be callable"):
        EventRewards(None)
    with pytest.raises(TypeError, match="similarity must be callable"):
        EventRewards(DEC, similarity="exact")


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"t_start": NAN, "t_end": 4}, ValueError, "t_start must be finite"),
        ({"t_start": 0, "t_end": NAN}, ValueError, "t_end must be finite"),
        ({"t_start": 0, "t_end": INF}, ValueError, "t_end must be finite"),
        ({"t_start": "0", "t_end": 4}, TypeError, "t_start must be a real number"),
        ({"obj": 3}, TypeError, "obj must be a str or None"),
    ],
)
def test_event_times_and_object(kwargs, err, match):
    with pytest.raises(err, match=match):
        AtomicEvent("visual", "man", "walk", **kwargs)


def test_event_from_dict_missing_keys():
    with pytest.raises(ValueError, match=r"event dict is missing \['subject', 'action'\]"):
        AtomicEvent.from_dict({"modality": "audio"})


@pytest.mark.parametrize("caption", [None, 123, ["we see the man walk"]])
def test_score_needs_a_str_caption(caption):
    with pytest.raises(TypeError, match="caption must be a str"):
        EventRewards(DEC).score(caption, GOLD)


@pytest.mark.parametrize(
    ("gold", "err", "match"),
    [
        ('[{"modality": ', ValueError, "gold events are not valid JSON"),
        ("{oops", ValueError, "gold events are not valid JSON"),
        (None, TypeError, "gold events must be an EventSet"),
        ("42", TypeError, "gold events must be an EventSet"),
        ({"evts": []}, TypeError, 'a gold dict needs an "events" key'),
        ([1, 2], TypeError, "an event must be a dict"),
    ],
)
def test_bad_gold(gold, err, match):
    with pytest.raises(err, match=match):
        EventRewards(DEC).score(CAP, gold)


def test_event_set_bad_input():
    with pytest.raises(ValueError, match=r"relations must be a list of \['before', 'overlap'\]"):
        EventSet([MAN, DOG], relations=["sideways"])
    with pytest.raises(TypeError, match="events must be an iterable of AtomicEvent"):
        EventSet(3)


def test_metrics_bad_input():
    with pytest.raises(ValueError, match="captions is empty"):
        evaluate_captions([], [])
    with pytest.raises(ValueError, match="captions is empty"):
        parse_rate([])
    with pytest.raises(TypeError, match="captions must be a sequence of str, not a single str"):
        EventRewards(DEC)(CAP, [GOLD])
    with pytest.raises(TypeError, match=r"captions\[0\] must be a str"):
        evaluate_captions([None], [GOLD])
    with pytest.raises(ValueError, match="1 captions but 2 references"):
        evaluate_captions([CAP], [GOLD], references=[CAP, CAP])
    with pytest.raises(TypeError, match=r"pred\[0\] must be an AtomicEvent"):
        match_events([1], list(GOLD))
    with pytest.raises(ValueError, match="similarity must return finite values"):
        match_events([MAN], [MAN], similarity=lambda p, g: NAN)


@pytest.mark.parametrize(
    ("rewards", "G", "err", "match"),
    [
        ([1.0, 2.0], 2.5, TypeError, "G must be an int"),
        ([], 2, ValueError, "rewards is empty"),
        ([1.0, INF], 2, ValueError, "rewards contain infinite values"),
    ],
)
def test_group_advantages_bad_input(rewards, G, err, match):
    with pytest.raises(err, match=match):
        group_advantages(rewards, G)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"beta": NAN}, ValueError, "beta must be finite"),
        ({"epsilon": NAN}, ValueError, "epsilon must be finite"),
        ({"epsilon_high": INF}, ValueError, "epsilon_high must be finite"),
        ({"temperature": NAN}, ValueError, "temperature must be finite"),
        ({"learning_rate": -1.0}, ValueError, "learning_rate must be > 0"),
        ({"learning_rate": NAN}, ValueError, "learning_rate must be finite"),
        ({"max_grad_norm": -1.0}, ValueError, r"max_grad_norm must be in \(0\.0, inf\), got -1\.0"),
        ({"reward_weights": [NAN]}, ValueError, r"reward_weights\[0\] must be finite"),
        ({"num_generations": 2.5}, TypeError, "num_generations must be an int"),
        ({"max_completion_length": 0}, ValueError, "max_completion_length must be >= 1"),
    ],
)
def test_grpo_config(kwargs, err, match):
    with pytest.raises(err, match=match):
        GRPOConfig(**kwargs)


def test_grpo_config_allows_negative_reward_weights():
    # TRL semantics: a negative weight is a penalty, a legitimate input
    assert GRPOConfig(reward_weights=[1.0, -0.5]).reward_weights == [1.0, -0.5]


def test_grpo_token_loss_shapes():
    z, cfg = torch.zeros(2, 3), GRPOConfig(beta=0.0)
    with pytest.raises(ValueError, match=r"advantages must have shape \(2,\)"):
        grpo_token_loss(z, z, None, torch.zeros(5), torch.ones(2, 3), cfg)
    with pytest.raises(ValueError, match="logp_ref"):
        grpo_token_loss(z, z, torch.zeros(1, 3), torch.zeros(2), torch.ones(2, 3), cfg)


@pytest.fixture
def small():
    clips = AVWorld(0).sample(6)
    torch.manual_seed(0)
    model = TinyAVCaptioner(d=16, nhead=2, n_enc=1, n_dec=1)
    return model, collate(clips), [c.caption for c in clips]


def _trainer(model):
    return GRPOTrainer(model, None, trl_reward_funcs(DEC), GRPOConfig(num_generations=2))


def test_trainer_bad_input(small):
    model, data, _ = small
    with pytest.raises(TypeError, match="reward and metric functions must be callable"):
        GRPOTrainer(model, None, [1.0], GRPOConfig(num_generations=2))
    with pytest.raises(TypeError, match="cfg must be a GRPOConfig"):
        GRPOTrainer(model, None, trl_reward_funcs(DEC), {"beta": 0})
    with pytest.raises(ValueError, match="data needs a 'gold_events' column"):
        grpo_train(_trainer(model), {"visual": data["visual"]}, 1, clips_per_step=2)
    with pytest.raises(TypeError, match="steps must be an int"):
        grpo_train(_trainer(model), data, 1.5, clips_per_step=2)
    with pytest.raises(TypeError, match="callback must be callable"):
        grpo_train(_trainer(model), data, 1, clips_per_step=2, callback=3)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"lr": NAN}, ValueError, "lr must be finite"),
        ({"lr": 0.0}, ValueError, r"lr must be in \(0\.0, inf\), got 0\.0"),
        ({"batch_size": 0}, ValueError, r"batch_size must be an int in \[1, inf\), got 0"),
        ({"steps": 1.5}, TypeError, "steps must be an int"),
        ({"steps": -1}, ValueError, r"steps must be an int in \[0, inf\), got -1"),
        ({"weight_decay": -0.1}, ValueError, r"weight_decay must be in \[0\.0, inf\), got -0\.1"),
    ],
)
def test_sft_train_bad_config(small, kwargs, err, match):
    model, data, caps = small
    with pytest.raises(err, match=match):
        sft_train(model, data, caps, **{"steps": 1, **kwargs})


def test_sft_train_single_str_captions(small):
    model, data, _ = small
    with pytest.raises(TypeError, match="captions must be a sequence of str, not a single str"):
        sft_train(model, data, "we see the man walk", 1)


def test_quality_control_bad_input():
    with pytest.raises(TypeError, match="caption 0 must be a str"):
        quality_control([(None, GOLD)], DEC)
    with pytest.raises(TypeError, match="decomposer must be callable"):
        quality_control([(CAP, GOLD)], None)


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"weights": (NAN, 1.0, 1.0)}, ValueError, r"weights\[0\] must be finite"),
        (
            {"weights": (-1.0, 1.0, 1.0)},
            ValueError,
            r"weights\[0\] must be in \[0\.0, inf\), got -1\.0",
        ),
        ({"qc_min_f1": NAN}, ValueError, "qc_min_f1 must be finite"),
        ({"sft_steps": -1}, ValueError, r"sft_steps must be an int in \[0, inf\), got -1"),
        ({"sft_lr": INF}, ValueError, "sft_lr must be finite"),
        ({"grpo_steps": 1.0}, TypeError, "grpo_steps must be an int"),
        ({"clips_per_step": 0}, ValueError, r"clips_per_step must be an int in \[1, inf\), got 0"),
    ],
)
def test_eva_cap_train_checks_everything_before_training(small, kwargs, err, match):
    model, data, caps = small
    before = [p.detach().clone() for p in model.parameters()]
    args = {"sft_steps": 1, "grpo_steps": 1, "clips_per_step": 2, **kwargs}
    with pytest.raises(err, match=match):
        eva_cap_train(model, data, caps, grpo_config=GRPOConfig(num_generations=2), **args)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"noise": NAN}, ValueError, "noise must be finite"),
        ({"noise": -1.0}, ValueError, r"noise must be in \[0\.0, inf\), got -1\.0"),
        ({"T": 4.5}, TypeError, "T must be an int"),
        ({"dv": 0}, ValueError, r"dv must be an int in \[1, inf\), got 0"),
    ],
)
def test_world_bad_config(kwargs, err, match):
    with pytest.raises(err, match=match):
        AVWorld(0, **kwargs)


def test_world_and_model_bad_input():
    with pytest.raises(ValueError, match="clips is empty"):
        collate([])
    with pytest.raises(TypeError, match="n must be an int"):
        AVWorld(0).sample(2.0)
    with pytest.raises(ValueError, match="d must be divisible by nhead"):
        TinyAVCaptioner(d=10, nhead=4)
    with pytest.raises(ValueError, match="captions is empty"):
        WordTokenizer().encode([], 5)
    model = TinyAVCaptioner(d=16, nhead=2, n_enc=1, n_dec=1)
    with pytest.raises(ValueError, match="visual contains NaN or infinite values"):
        model.encode(torch.full((1, 16, 32), NAN), torch.zeros(1, 16, 32))


# -- progress ----------------------------------------------------------------------------


def _stderr(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    return buf


def test_training_loops_show_progress(small, monkeypatch):
    model, data, caps = small
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    buf = _stderr(monkeypatch)
    sft_train(model, data, caps, 2, progress=True)
    assert "EVA-Cap SFT" in buf.getvalue()
    grpo_train(_trainer(model), data, 2, clips_per_step=2, progress=True)
    assert "EVA-Cap GRPO" in buf.getvalue()
    assert "2/2" in buf.getvalue()


def test_eva_cap_train_progress_and_silence(small, monkeypatch):
    model, data, caps = small
    args = {"sft_steps": 1, "grpo_steps": 1, "clips_per_step": 2}
    cfg = GRPOConfig(num_generations=2)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    buf = _stderr(monkeypatch)
    eva_cap_train(model, data, caps, grpo_config=cfg, progress=True, **args)
    assert "EVA-Cap SFT" in buf.getvalue()
    assert "EVA-Cap GRPO" in buf.getvalue()
    monkeypatch.setenv("TQDM_DISABLE", "1")
    buf = _stderr(monkeypatch)
    eva_cap_train(model, data, caps, grpo_config=cfg, **args)
    eva_cap_train(model, data, caps, grpo_config=cfg, progress=True, **args)
    assert buf.getvalue() == ""
