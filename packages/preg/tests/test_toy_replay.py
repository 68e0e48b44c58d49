import numpy as np
import pytest
import torch

from preg import PrefixGuidedSampler, RegexExtractor, ReplayPool, SelfConsistency
from preg.generators.sim import PathSimulator, SimConfig
from preg.generators.toy import TinyLMGenerator
from preg.toy import VOCAB, CharGPT, CharGPTConfig, extract_answer, make_problem, train_tiny_lm

EX = RegexExtractor(r"A(\d+)\.", cast=int)


def test_arith_problem_format():
    rng = np.random.default_rng(0)
    for _ in range(200):
        pr = make_problem(rng)
        assert len(pr.prompt) == 12
        assert pr.prompt[0] == "Q"
        assert pr.prompt[-1] == "?"
        assert extract_answer(pr.completion) == pr.answer
        x = int(pr.prompt[1:3])
        for eq in pr.completion.split(";")[:-1]:
            lhs, rhs = eq.split("=")
            assert int(lhs[: len(str(x))]) == x
            x = eval(lhs)
            assert x == int(rhs) >= 0
        assert x == pr.answer
    with pytest.raises(ValueError, match="steps must be"):
        make_problem(rng, steps=0)


def test_char_model_cache_and_recorded_logprobs():
    cfg = CharGPTConfig(d_model=16, n_layers=2, n_heads=2)
    model = CharGPT(cfg)
    model.reset_parameters(torch.Generator().manual_seed(0))
    model.eval()
    gen = TinyLMGenerator(model, top_k=4)
    prompt = "Q51-8-3-3+2?"
    paths = gen.sample(prompt, 3, 10, seed=0)
    stoi = {c: i for i, c in enumerate(VOCAB)}
    base = [stoi[c] for c in prompt]
    with torch.no_grad():
        for p in paths:
            logits, _ = model(torch.tensor([base + p.token_ids]))
            lp = torch.log_softmax(logits[0].double(), -1)[len(base) - 1 : -1]
            want = lp.gather(-1, torch.tensor(p.token_ids)[:, None])[:, 0]
            np.testing.assert_allclose(p.token_logprobs, want.numpy(), atol=1e-5)
            np.testing.assert_allclose(p.topk_logprobs, lp.topk(4, -1).values.numpy(), atol=1e-5)
    pre = [p.truncate(3) for p in paths]
    grown = gen.continue_(prompt, pre, 10, seed=1)
    for a, b in zip(pre, grown, strict=True):
        assert b.token_ids[:3] == a.token_ids
        assert b.text.startswith(a.text)


@pytest.mark.slow  # the first optimizer step in a process loads torch's compiler (10-30 s)
def test_training_is_deterministic(tmp_path):
    cfg = CharGPTConfig(d_model=16, n_layers=1, n_heads=2)
    a = train_tiny_lm(steps=3, seed=5, batch_size=4, config=cfg, cache_dir=tmp_path)
    b = train_tiny_lm(steps=3, seed=5, batch_size=4, config=cfg)
    c = train_tiny_lm(steps=3, seed=5, batch_size=4, config=cfg, cache_dir=tmp_path)  # cached
    for x, y, z in zip(a.parameters(), b.parameters(), c.parameters(), strict=True):
        torch.testing.assert_close(x, y)
        torch.testing.assert_close(x, z)
    assert len(list(tmp_path.glob("chargpt-*.pt"))) == 1


def test_replay_pool_is_a_plain_loop_over_pool_generator():
    sim = PathSimulator(SimConfig(n_questions=5, pool_size=20), seed=0)
    qs = sim.questions
    pool = ReplayPool([q.prompt for q in qs], [q.paths for q in qs], [q.answer for q in qs])
    res = pool.evaluate(
        lambda g: SelfConsistency(g, EX, n=5, max_new_tokens=32), resamples=3, seed=2
    )
    assert res.correct.shape == (3, 5)
    assert np.all(res.tokens == 5 * 32)
    gen = __import__("preg").PoolGenerator(pool.pools)
    sc = SelfConsistency(gen, EX, n=5, max_new_tokens=32)
    manual = [
        [
            float(sc.run(q.prompt, seed=2 * 1_000_003 + r * 10_007 + i).answer == 0)
            for i, q in enumerate(qs)
        ]
        for r in range(3)
    ]
    np.testing.assert_array_equal(res.correct, manual)
    acc = pool.per_sample_accuracy(EX)
    np.testing.assert_allclose(acc, [np.mean([p.answer == 0 for p in q.paths]) for q in qs])


def test_simulator_prefix_selection_helps_only_with_signal():
    def gain(delta_prefix):
        sim = PathSimulator(
            SimConfig(n_questions=60, pool_size=32, delta_prefix=delta_prefix), seed=1
        )
        qs = sim.questions
        pool = ReplayPool([q.prompt for q in qs], [q.paths for q in qs], [q.answer for q in qs])
        preg = pool.evaluate(
            lambda g: PrefixGuidedSampler(
                g, EX, n_prefixes=32, prefix_len=8, keep=8, max_new_tokens=32, weight="uniform"
            ),
            resamples=4,
        )
        sc = pool.evaluate(lambda g: SelfConsistency(g, EX, n=14, max_new_tokens=32), resamples=4)
        assert preg.mean_tokens == pytest.approx(32 * 8 + 8 * 24)
        return preg.accuracy - sc.accuracy

    assert gain(2.0) > 0.05
    assert gain(0.0) < 0.03
