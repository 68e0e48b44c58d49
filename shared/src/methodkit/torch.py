"""torch helpers (imports torch; install ``methodkit[torch]``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from methodkit._seeding import check_seed, derive_seed

if TYPE_CHECKING:
    import torch as _torch


def generator(
    seed: int | None = None, *keys: int, device: _torch.device | str | None = None
) -> _torch.Generator:
    """Return a seeded ``torch.Generator``: the one way packages make seeded torch streams.

    ``generator(seed)`` is ``torch.Generator().manual_seed(seed)``; with ``keys`` the seed is
    first mixed with them by :func:`methodkit.derive_seed`, so ``generator(seed, client, round)``
    gives each client and round its own reproducible stream.

    Args:
        seed: Non-negative int, or None for a generator seeded from OS entropy.
        *keys: Non-negative ints mixed into ``seed`` (not allowed without a seed).
        device: Device of the generator (default CPU); draw noise on the data's device.

    Returns:
        The generator.

    Raises:
        TypeError: If ``seed`` or a key is not an int.
        ValueError: If ``seed`` or a key is negative, or keys are given without a seed.
    """
    import torch

    gen = torch.Generator(device=device if device is not None else "cpu")
    if seed is None:
        if keys:
            raise ValueError(f"keys {keys} need a seed to mix with, got seed=None")
        gen.seed()
        return gen
    gen.manual_seed(derive_seed(seed, *keys) if keys else check_seed(seed))
    return gen
