"""The contract every sampler in the monorepo keeps (issue 50).

A sampler takes the user's model as a callable and a ``torch.Generator`` (CONTRIBUTING §8).
Subclass :class:`SamplerContract` in a test file, say how to draw once with a given generator,
and pytest collects the checks a user relies on: the same seed gives the same draws bit for
bit, another seed gives other draws, every draw is finite, and the global random states
(torch, NumPy, ``random``) are left exactly as they were.
"""

from __future__ import annotations

import dataclasses
import pickle
import random
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch


def array_leaves(output: Any) -> Iterator[np.ndarray]:
    """Every tensor or array inside ``output`` (tuples, lists, dicts and dataclasses walked).

    Example:
        >>> import torch
        >>> [a.shape for a in array_leaves({"x": torch.zeros(2), "n": (np.ones((1, 3)), 4)})]
        [(2,), (1, 3)]
    """
    if isinstance(output, torch.Tensor):
        yield output.detach().cpu().numpy()
    elif isinstance(output, np.ndarray):
        yield output
    elif isinstance(output, Mapping):
        for value in output.values():
            yield from array_leaves(value)
    elif isinstance(output, list | tuple):
        for value in output:
            yield from array_leaves(value)
    elif dataclasses.is_dataclass(output) and not isinstance(output, type):
        for field in dataclasses.fields(output):
            yield from array_leaves(getattr(output, field.name))


class SamplerContract:
    """The behaviour every sampler must have; subclass it in a test file.

    Attributes:
        seed: The seed of the first draw; the "other seed" check uses ``seed + 1``.
    """

    seed: int = 0

    def draw(self, generator: torch.Generator) -> Any:
        """One small draw (about a second) whose randomness all comes from ``generator``."""
        raise NotImplementedError("subclasses of SamplerContract implement draw")

    # ----------------------------------------------------------------- helpers
    def _arrays(self, seed: int) -> list[np.ndarray]:
        arrays = list(array_leaves(self.draw(torch.Generator().manual_seed(seed))))
        assert arrays, "draw() returned no tensor or array to compare"
        return arrays

    # ------------------------------------------------------------------- checks
    def test_same_seed_same_draws(self) -> None:
        """Two draws from generators seeded alike are equal bit for bit."""
        first, second = self._arrays(self.seed), self._arrays(self.seed)
        assert len(first) == len(second)
        for a, b in zip(first, second, strict=True):
            np.testing.assert_array_equal(a, b)

    def test_other_seed_other_draws(self) -> None:
        """Another seed changes at least one drawn value (the generator is really used)."""
        first, other = self._arrays(self.seed), self._arrays(self.seed + 1)
        differs = any(
            a.shape != b.shape or not np.array_equal(a, b)
            for a, b in zip(first, other, strict=True)
        )
        assert differs, "seeds seed and seed + 1 gave identical draws: is the generator used?"

    def test_draws_are_finite(self) -> None:
        """No NaN or infinity in any floating-point output."""
        for a in self._arrays(self.seed):
            if np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.complexfloating):
                assert np.isfinite(a).all(), f"non-finite values in a draw of shape {a.shape}"

    def test_global_random_states_untouched(self) -> None:
        """Drawing neither reads nor reseeds torch's, NumPy's or ``random``'s global state."""
        torch_state = torch.random.get_rng_state()
        numpy_state = pickle.dumps(np.random.get_state(legacy=False))  # noqa: NPY002 - checked
        python_state = random.getstate()
        self._arrays(self.seed)
        assert torch.equal(torch.random.get_rng_state(), torch_state), "global torch RNG moved"
        after = pickle.dumps(np.random.get_state(legacy=False))  # noqa: NPY002 - checked
        assert after == numpy_state, "global NumPy RNG moved"
        assert random.getstate() == python_state, "global `random` state moved"
