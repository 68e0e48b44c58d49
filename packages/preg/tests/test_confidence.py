import numpy as np
import preg_reference as reference
import pytest

from preg import aggregate, token_confidence
from preg.confidence import path_score


def test_neg_entropy_matches_brute_force_and_is_shift_invariant():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(7, 11)) * 3
    c = token_confidence(logits, "neg_entropy")
    np.testing.assert_allclose(c, reference.neg_entropy(logits), atol=1e-10)
    np.testing.assert_allclose(token_confidence(logits + 5.0, "neg_entropy"), c, atol=1e-10)
    assert np.all(c <= 0)


def test_logprob_from_logits_and_topk_mean_definition():
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(5, 9))
    tokens = rng.integers(0, 9, size=5)
    lp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    np.testing.assert_allclose(
        token_confidence(logits, "logprob", tokens=tokens), lp[np.arange(5), tokens], atol=1e-12
    )
    k = 3
    want = np.array([-np.mean(sorted(row, reverse=True)[:k]) for row in lp])
    np.testing.assert_allclose(token_confidence(logits, "topk_mean", k=k), want, atol=1e-12)


def test_path_topk_renormalised_entropy(pools):
    p = pools["q0"][0]
    p2 = type(p)(p.token_ids, p.text, p.token_logprobs, None, p.topk_logprobs)
    got = token_confidence(p2, "neg_entropy")
    want = reference.neg_entropy(p.topk_logprobs)  # softmax renormalises the top-k
    np.testing.assert_allclose(got, want, atol=1e-10)
    np.testing.assert_allclose(token_confidence(p, "neg_entropy"), -p.token_entropies)


def test_lowest_group_is_brute_force_min_and_short_fallback():
    rng = np.random.default_rng(2)
    c = rng.normal(size=40)
    w = 7
    brute = reference.lowest_group(c, w)
    assert aggregate(c, "lowest_group", window=w) == pytest.approx(brute, abs=1e-12)
    assert aggregate(c[:5], "lowest_group", window=w) == pytest.approx(c[:5].mean())
    assert aggregate(c, "tail", window=w) == pytest.approx(c[-w:].mean())
    means = sorted(c[i : i + w].mean() for i in range(len(c) - w + 1))
    n = int(np.ceil(0.2 * len(means)))
    assert aggregate(c, "bottom_frac", window=w, frac=0.2) == pytest.approx(np.mean(means[:n]))


def test_confidence_errors(pools):
    p = pools["q0"][0]
    with pytest.raises(ValueError, match="kind must be one of"):
        token_confidence(p, "bogus")
    with pytest.raises(ValueError, match="only kind='logprob'"):
        token_confidence(np.zeros(3), "neg_entropy")
    with pytest.raises(ValueError, match="needs tokens"):
        token_confidence(np.zeros((3, 4)), "logprob")
    bare = type(p)([], "", np.zeros(3))
    with pytest.raises(ValueError, match="topk_logprobs"):
        token_confidence(bare, "topk_mean")
    with pytest.raises(ValueError, match="conf is empty"):
        aggregate([], "mean")
    with pytest.raises(ValueError, match="how must be one of"):
        aggregate([1.0], "median")
    with pytest.raises(ValueError, match="window must be"):
        aggregate([1.0], "tail", window=0)
    assert path_score(p) == pytest.approx(p.token_logprobs.mean())
