"""Seeding for scripts and tests, and turning seed-or-generator arguments into generators."""

from __future__ import annotations

import random
import sys

import numpy as np

SeedLike = int | np.random.Generator | None


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python's ``random``, NumPy's global RNG and torch (only if already imported).

    Meant for the top of scripts and tests; library code takes explicit generators instead.
    torch is seeded only when some module already imported it, so that calling this from a
    numpy-only package never pays the torch import.

    Args:
        seed: Non-negative integer seed.

    Returns:
        A fresh ``np.random.Generator`` seeded with ``seed``.

    Raises:
        ValueError: If ``seed`` is negative.
        TypeError: If ``seed`` is not an integer.
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an int, got {type(seed).__name__} ({seed!r})")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    seed = int(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - seeding the legacy global RNG is the point
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
    return np.random.default_rng(seed)


def rng(seed_or_rng: SeedLike = None) -> np.random.Generator:
    """Return a NumPy generator from an int seed, an existing generator, or ``None``.

    An existing generator is returned as is (not copied), so a caller that passes its own
    generator sees its state advance, as with scikit-learn's ``random_state``.

    Args:
        seed_or_rng: ``None`` (fresh OS entropy), a non-negative int, or a generator.

    Returns:
        A ``np.random.Generator``.

    Raises:
        TypeError: For any other type (``np.random.RandomState`` included).
        ValueError: For a negative seed.
    """
    if isinstance(seed_or_rng, np.random.Generator):
        return seed_or_rng
    if seed_or_rng is None:
        return np.random.default_rng()
    if isinstance(seed_or_rng, bool) or not isinstance(seed_or_rng, int | np.integer):
        raise TypeError(
            "random_state must be None, an int or a numpy.random.Generator, "
            f"got {type(seed_or_rng).__name__}"
        )
    if seed_or_rng < 0:
        raise ValueError(f"random_state must be >= 0, got {seed_or_rng}")
    return np.random.default_rng(int(seed_or_rng))
