"""Seeding for scripts and tests, and turning seed-or-generator arguments into generators."""

from __future__ import annotations

import random
import sys

import numpy as np

SeedLike = int | np.random.Generator | None
MASK64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def check_seed(seed: int, name: str = "seed") -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"{name} must be an int, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"{name} must be >= 0, got {seed}")
    return seed


def derive_seed(seed: int, *keys: int) -> int:
    """Mix ``seed`` with integer ``keys`` into a new 63-bit seed (splitmix64 chain).

    One user seed becomes independent streams per step, client or task, e.g.
    ``derive_seed(seed, 0, step)``; :func:`methodkit.torch.generator` seeds from it.

    Raises:
        TypeError: If ``seed`` or a key is not an int.
        ValueError: If ``seed`` or a key is negative.
    """
    x = splitmix64(check_seed(seed) & MASK64)
    for k in keys:
        x = splitmix64(x ^ check_seed(k, "key"))
    return x >> 1


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
