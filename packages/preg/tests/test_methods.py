import numpy as np
import pytest

from preg import (
    BestOfN,
    DeepConfOffline,
    PoolGenerator,
    PrefixConfidenceBestOf,
    PrefixGuidedSampler,
    RegexExtractor,
    SelfConsistency,
    equal_budget_sc,
    path_score,
    weighted_vote,
)

EX = RegexExtractor(r"A(\d+)\.", cast=int)


def test_keep_all_full_prefix_equals_self_consistency(pools):
    gen = PoolGenerator(pools)
    for seed in range(5):
        for q in pools:
            a = PrefixGuidedSampler(
                gen,
                EX,
                n_prefixes=8,
                prefix_len=40,
                keep=8,
                max_new_tokens=40,
                weight="uniform",
                allow_full_prefix=True,
            ).run(q, seed=seed)
            b = SelfConsistency(gen, EX, n=8, max_new_tokens=40).run(q, seed=seed)
            assert a.answer == b.answer
            assert a.totals == b.totals
            assert a.total_tokens == b.total_tokens
            assert a.completion_tokens == 0


def test_keep_one_uniform_equals_prefix_best_of(pools):
    gen = PoolGenerator(pools)
    for seed in range(5):
        for q in pools:
            a = PrefixGuidedSampler(
                gen, EX, n_prefixes=10, prefix_len=6, keep=1, max_new_tokens=40, weight="uniform"
            ).run(q, seed=seed)
            b = PrefixConfidenceBestOf(gen, EX, n_prefixes=10, prefix_len=6, max_new_tokens=40).run(
                q, seed=seed
            )
            assert a.answer == b.answer
            assert (a.prefix_tokens, a.completion_tokens) == (b.prefix_tokens, b.completion_tokens)


def test_token_ledger_and_selection(pools):
    gen = PoolGenerator(pools)
    q = "q1"
    n, ell, k, t = 12, 12, 3, 40
    s = PrefixGuidedSampler(gen, EX, n_prefixes=n, prefix_len=ell, keep=k, max_new_tokens=t)
    res = s.run(q, seed=3)
    # the same draw, by hand
    prefixes = gen.sample(q, n, ell, seed=__import__("preg._common")._common.derive_seed(3, 0))
    full = [pools[q][p.meta["pool_index"]] for p in prefixes]
    assert res.prefix_tokens == sum(min(ell, f.n_tokens) for f in full)
    pscore = [path_score(p) for p in prefixes]
    kept = sorted(np.argsort(-np.asarray(pscore), kind="stable")[:k])
    assert res.completion_tokens == sum(max(full[i].n_tokens - ell, 0) for i in kept)
    assert res.total_tokens == res.prefix_tokens + res.completion_tokens
    assert [p.meta["pool_index"] for p in res.paths] == [
        prefixes[i].meta["pool_index"] for i in kept
    ]


class _CountingGen(PoolGenerator):
    def __init__(self, pools):
        super().__init__(pools)
        self.continued = []

    def continue_(self, prompt, paths, max_new_tokens, **kw):
        self.continued += list(paths)
        return super().continue_(prompt, paths, max_new_tokens, **kw)


def test_paths_finished_in_prefix_are_never_continued(pools):
    gen = _CountingGen(pools)
    s = PrefixGuidedSampler(gen, EX, n_prefixes=24, prefix_len=15, keep=24, max_new_tokens=40)
    res = s.run("q2", seed=0)
    assert all(not p.finished for p in gen.continued)
    assert all(p.n_tokens == 15 for p in gen.continued)
    assert res.total_tokens == sum(p.n_tokens for p in pools["q2"])


def test_multi_stage_schedule_counts_tokens(pools):
    gen = PoolGenerator(pools)
    s = PrefixGuidedSampler(gen, EX, n_prefixes=16, schedule=[(5, 8), (12, 2)], max_new_tokens=40)
    res = s.run("q3", seed=1)
    assert len(res.paths) == 2
    assert res.prefix_tokens <= 16 * 5 + 8 * 7
    assert res.total_tokens == res.prefix_tokens + res.completion_tokens


def test_baselines_on_existing_paths(pools):
    paths = pools["q0"][:10]
    sc = SelfConsistency(None, EX, n=10).aggregate(paths)
    assert sc.total_tokens == sum(p.n_tokens for p in paths)
    bon = BestOfN(None, EX, n=10).aggregate(paths)
    best = max(range(10), key=lambda i: path_score(paths[i]))
    assert bon.answer == EX(paths[best].text)
    dc = DeepConfOffline(None, EX, n=10, keep_frac=0.5, window=4).aggregate(paths)
    assert len(dc.paths) == 5
    assert dc.total_tokens == sc.total_tokens
    ext = BestOfN(None, EX, n=10, scorer=lambda p: -p.n_tokens).aggregate(paths)
    shortest = min(range(10), key=lambda i: (paths[i].n_tokens, i))
    assert ext.answer == EX(paths[shortest].text)


def test_equal_budget_sc():
    assert equal_budget_sc(32, 8, 9, 36) == pytest.approx(32 * 0.25 + 8 * 0.75)
    with pytest.raises(ValueError, match="keep"):
        equal_budget_sc(4, 8, 9, 36)


class _NoLogprobs(PoolGenerator):
    supports_logprobs = False


def test_bad_inputs(pools):
    gen = PoolGenerator(pools)
    kw = {"max_new_tokens": 40}
    with pytest.raises(ValueError, match="n_prefixes must be >= 1"):
        PrefixGuidedSampler(gen, EX, n_prefixes=0, keep=1, **kw)
    with pytest.raises(ValueError, match="keep=9 must be <= n_prefixes=8"):
        PrefixGuidedSampler(gen, EX, n_prefixes=8, keep=9, **kw)
    with pytest.raises(ValueError, match="keep must be >= 1"):
        PrefixGuidedSampler(gen, EX, n_prefixes=8, keep=0, **kw)
    with pytest.raises(ValueError, match="keep_frac must be in"):
        PrefixGuidedSampler(gen, EX, n_prefixes=8, keep_frac=1.5, **kw)
    with pytest.raises(ValueError, match="prefix_len must be >= 1"):
        PrefixGuidedSampler(gen, EX, n_prefixes=8, keep=2, prefix_len=0, **kw)
    with pytest.raises(ValueError, match="allow_full_prefix"):
        PrefixGuidedSampler(gen, EX, n_prefixes=8, keep=2, prefix_len=40, **kw)
    with pytest.raises(ValueError, match="max-logprobs"):
        PrefixGuidedSampler(_NoLogprobs(pools), EX, n_prefixes=8, keep=2, prefix_len=4, **kw)
    with pytest.raises(ValueError, match="weights must be >= 0"):
        weighted_vote([1], [-0.5])
    with pytest.warns(UserWarning, match="identical paths"):
        PrefixGuidedSampler(gen, EX, n_prefixes=8, keep=2, prefix_len=4, temperature=0.0, **kw)
    with pytest.raises(TypeError, match="unhashable"):
        PrefixGuidedSampler(gen, lambda t: [t], n_prefixes=4, keep=2, prefix_len=4, **kw).run("q0")
    # self-consistency needs no log-probs; the weighted version does
    SelfConsistency(_NoLogprobs(pools), EX, n=4)
    with pytest.raises(ValueError, match="supports_logprobs=False"):
        SelfConsistency(_NoLogprobs(pools), EX, n=4, weighted=True)


def test_keep_all_full_weight_equals_confidence_weighted_sc(pools):
    gen = PoolGenerator(pools)
    for seed in range(3):
        for q in pools:
            a = PrefixGuidedSampler(
                gen,
                EX,
                n_prefixes=8,
                prefix_len=40,
                keep=8,
                max_new_tokens=40,
                beta=3.0,
                allow_full_prefix=True,
            ).run(q, seed=seed)
            b = SelfConsistency(gen, EX, n=8, max_new_tokens=40, weighted=True, beta=3.0).run(
                q, seed=seed
            )
            assert a.answer == b.answer
            assert a.totals == pytest.approx(b.totals)


def test_run_many_shows_progress_when_asked_and_keeps_results(pools, monkeypatch, capsys):
    gen = PoolGenerator(pools)
    sampler = PrefixGuidedSampler(gen, EX, n_prefixes=4, prefix_len=8, keep=2, max_new_tokens=40)
    prompts = list(pools)[:2]
    quiet = sampler.run_many(prompts, seed=3)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    shown = sampler.run_many(prompts, seed=3, progress=True)
    assert "PreG" in capsys.readouterr().err
    assert [r.answer for r in shown] == [r.answer for r in quiet]
    assert [r.total_tokens for r in shown] == [r.total_tokens for r in quiet]
