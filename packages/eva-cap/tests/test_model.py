import numpy as np
import pytest
import torch

from eva_cap import (
    GrammarDecomposer,
    GRPOConfig,
    eva_cap_train,
    evaluate_captions,
    index_batch,
    order_kendall_tau,
    parse_rate,
    quality_control,
    sft_train,
)
from eva_cap.baselines import TextOverlapReward, rouge_l_f1, text_overlap_reward
from eva_cap.synthetic import TinyAVCaptioner, WordTokenizer
from reference import lcs_reference


def test_cached_sampling_agrees_with_teacher_forcing(tiny, batch):
    sub = index_batch(batch, range(4))
    tok, mask = tiny.sample(sub, 2, 12, 0.0)
    assert tok.shape[0] == 8
    assert torch.all(mask[:, 0] == 1)
    # greedy: every sampled token is the argmax of the teacher-forced distribution
    mem_kv = tiny._memory_kv(tiny.encode(sub["visual"], sub["audio"]), 8)
    bos = torch.full_like(tok[:, :1], tiny.tokenizer.BOS)
    logits = tiny._decode(torch.cat([bos, tok[:, :-1]], 1), mem_kv)
    assert torch.equal(logits.argmax(-1)[mask.bool()], tok[mask.bool()])


def test_sampling_is_seeded(tiny, batch):
    sub = index_batch(batch, range(3))
    a = tiny.sample(sub, 4, 10, 1.0, torch.Generator().manual_seed(1))[0]
    b = tiny.sample(sub, 4, 10, 1.0, torch.Generator().manual_seed(1))[0]
    assert torch.equal(a, b)


def test_stream_length_mismatch_is_an_error(tiny, batch):
    with pytest.raises(ValueError, match="different lengths"):
        tiny.encode(batch["visual"], batch["audio"][:, :10])
    with pytest.raises(ValueError, match="visual and 32 audio features"):
        TinyAVCaptioner(dv=8).encode(batch["visual"], batch["audio"])


def test_truncation_warns():
    tok = WordTokenizer()
    with pytest.warns(UserWarning, match="1 of 2 captions are longer than max_len=4"):
        t, _m = tok.encode(["we see the dog run", "we hear music"], 4)
    assert t.shape == (2, 4)
    assert t[0, -1] == tok.EOS
    assert tok.decode(t) == ["we see the", "we hear music"]


def test_sft_lowers_the_loss_and_validates(tiny, batch):
    losses = sft_train(tiny, batch, batch["reference"], 30, 3e-3, batch_size=8)
    assert np.mean(losses[-5:]) < 0.7 * np.mean(losses[:5])
    with pytest.raises(ValueError, match="2 captions but inputs"):
        sft_train(tiny, batch, batch["reference"][:2], 1)
    with pytest.raises(ValueError, match="at least one"):
        sft_train(tiny, batch, [], 1)


def test_quality_control(batch):
    dec = GrammarDecomposer()
    keep = quality_control(zip(batch["web"], batch["gold_events"], strict=False), dec, 0.8)
    assert keep.dtype == bool
    assert keep.shape == (24,)
    assert quality_control(zip(batch["reference"], batch["gold_events"], strict=False), dec).all()
    assert not quality_control([("", batch["gold_events"][0])], dec, 0.0).any()
    with pytest.raises(ValueError, match="min_f1"):
        quality_control([], dec, 1.5)


def test_metrics(batch):
    gold, ref = batch["gold_events"], batch["reference"]
    r = evaluate_captions(ref, gold, references=ref)
    assert r["mean_event_score"] == 1.0
    assert r["length_ratio"] == 1.0
    assert r["kendall_tau"] == 1.0
    assert parse_rate(["", ref[0]]) == 0.5
    rev = [" then ".join(reversed(c.split(" then "))) for c in ref]
    multi = [i for i, c in enumerate(ref) if " while " not in c and " then " in c]
    assert order_kendall_tau([rev[i] for i in multi], [gold[i] for i in multi]) == -1.0
    with pytest.raises(ValueError, match="captions but"):
        evaluate_captions(ref[:1], gold)


def test_rouge_l_against_the_reference_lcs():
    rng = np.random.default_rng(0)
    words = ["a", "b", "c", "d"]
    for _ in range(50):
        c = " ".join(rng.choice(words, rng.integers(1, 8)))
        r = " ".join(rng.choice(words, rng.integers(1, 8)))
        lcs = lcs_reference(c.split(), r.split())
        p, q = lcs / len(c.split()), lcs / len(r.split())
        assert rouge_l_f1(c, r) == pytest.approx(0 if lcs == 0 else 2 * p * q / (p + q))
    assert text_overlap_reward(["a b"], ["a b"]) == [1.0]
    with pytest.raises(ValueError, match="reference"):
        TextOverlapReward()(completions=["a"])


def test_eva_cap_pipeline_runs(tiny, batch):
    res = eva_cap_train(tiny, batch, batch["web"], sft_steps=3, sft_batch=8, grpo_steps=2,
                        clips_per_step=2, grpo_config=GRPOConfig(num_generations=2))  # fmt: skip
    assert len(res.sft_losses) == 3
    assert len(res.grpo_logs) == 2
    assert res.kept.any()
    with pytest.raises(ValueError, match="no caption passed"):
        eva_cap_train(tiny, batch, [""] * 24, sft_steps=1, grpo_steps=1)
