"""SamplerContract passes a well-behaved sampler and catches each broken one."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from methodkit.testing import SamplerContract  # noqa: E402


def _good(generator):
    """A random walk whose every draw comes from ``generator``; returns a dataclass-free tuple."""
    steps = torch.randn(4, 8, generator=generator, dtype=torch.float64)
    return steps.cumsum(1), {"accepted": torch.rand(4, generator=generator) > 0.5}


class TestGoodSamplerKeepsTheContract(SamplerContract):
    def draw(self, generator):
        return _good(generator)


def _uses_global_torch(generator):
    return torch.randn(4, 8)  # ignores the generator: the global RNG moves


def _ignores_the_seed(generator):
    return torch.randn(4, 8, generator=torch.Generator().manual_seed(7))


def _reseeds_numpy(generator):
    np.random.seed(0)  # noqa: NPY002 - the broken sampler seeds the global RNG on purpose
    return _good(generator)


def _nan(generator):
    out = torch.randn(4, 8, generator=generator)
    out[0, 0] = float("nan")
    return out


def _nothing(generator):
    return {"n_calls": 3}


def _contract(draw_fn):
    class Case(SamplerContract):
        def draw(self, generator):
            return draw_fn(generator)

    return Case()


@pytest.mark.parametrize(
    ("draw_fn", "check", "message"),
    [
        (_uses_global_torch, "test_same_seed_same_draws", "not equal"),
        (_uses_global_torch, "test_global_random_states_untouched", "global torch RNG moved"),
        (_ignores_the_seed, "test_other_seed_other_draws", "identical draws"),
        (_reseeds_numpy, "test_global_random_states_untouched", "global NumPy RNG moved"),
        (_nan, "test_draws_are_finite", "non-finite"),
        (_nothing, "test_same_seed_same_draws", "no tensor or array"),
    ],
)
def test_contract_catches_a_broken_sampler(draw_fn, check, message):
    with pytest.raises(AssertionError, match=message):
        getattr(_contract(draw_fn), check)()


def test_dataclass_outputs_are_walked():
    from dataclasses import dataclass

    from methodkit.testing._sampler_contract import array_leaves

    @dataclass
    class Result:
        samples: object
        note: str

    leaves = list(array_leaves(Result(samples=[torch.ones(2), np.zeros(3)], note="x")))
    assert [a.shape for a in leaves] == [(2,), (3,)]
