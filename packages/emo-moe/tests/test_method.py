import numpy as np
import pytest
from reference import trimmed_mean_reference

import emo_moe


@pytest.mark.parametrize("trim", [0.0, 0.1, 0.25, 0.49])
def test_matches_the_reference(trim):
    x = np.random.default_rng(0).standard_cauchy(101)
    assert emo_moe.trimmed_mean(x, trim) == pytest.approx(trimmed_mean_reference(x, trim))


def test_zero_trim_is_the_sample_mean():
    x = np.random.default_rng(1).normal(size=50)
    assert emo_moe.trimmed_mean(x, 0.0) == pytest.approx(emo_moe.baselines.sample_mean(x))


@pytest.mark.parametrize(
    ("x", "trim", "match"),
    [
        ([], 0.1, "non-empty"),
        ([[1.0]], 0.1, "1-D"),
        ([1.0, np.nan], 0.1, "finite"),
        ([1.0], 0.5, "trim"),
    ],
)
def test_bad_input(x, trim, match):
    with pytest.raises(ValueError, match=match):
        emo_moe.trimmed_mean(x, trim)
