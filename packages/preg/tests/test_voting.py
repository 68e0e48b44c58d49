import numpy as np
import pytest

from preg import majority_vote, scores_to_weights, weighted_vote


def test_equal_weights_reproduce_majority_and_scaling_invariance():
    rng = np.random.default_rng(0)
    for _ in range(50):
        answers = [int(a) if a < 4 else None for a in rng.integers(0, 5, size=9)]
        w = rng.exponential(size=9)
        assert weighted_vote(answers, np.full(9, 2.5))[0] == majority_vote(answers)[0]
        assert weighted_vote(answers, w * 7.3)[0] == weighted_vote(answers, w)[0]


def test_none_ignored_and_all_none():
    assert majority_vote([None, "a", None])[0] == "a"
    assert majority_vote([None, None]) == (None, {})


def test_tie_rule_is_deterministic():
    # equal totals: the larger single weight wins
    assert weighted_vote(["a", "a", "b"], [0.5, 0.5, 1.0])[0] == "b"
    # equal totals and equal single weights: the earliest path wins
    assert weighted_vote(["b", "a"], [1.0, 1.0])[0] == "b"
    assert weighted_vote(["a", "b"], [1.0, 1.0])[0] == "a"


def test_vote_errors():
    with pytest.raises(ValueError, match="weights must be >= 0"):
        weighted_vote(["a"], [-1.0])
    with pytest.raises(ValueError, match="answers but"):
        weighted_vote(["a", "b"], [1.0])
    with pytest.raises(TypeError, match="unhashable"):
        majority_vote([[1, 2]])


def test_scores_to_weights():
    s = np.array([-3.0, -1.0, -2.0])
    np.testing.assert_allclose(scores_to_weights(s, 2.0), np.exp(2.0 * (s + 1.0)))
    np.testing.assert_allclose(scores_to_weights(s, mode="rank"), [1, 3, 2])
    with pytest.raises(ValueError, match="mode must be"):
        scores_to_weights(s, mode="softmax")
