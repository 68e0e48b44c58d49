"""torch helpers (imports torch; install ``methodkit[torch]``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch as _torch


def generator(seed: int | None = None, device: str = "cpu") -> _torch.Generator:
    """Return a ``torch.Generator`` on ``device``, seeded with ``seed`` (or non-deterministically).

    Args:
        seed: Non-negative int, or None for a generator seeded from OS entropy.
        device: Device of the generator; samplers draw noise on the device of their data.

    Returns:
        The generator.

    Raises:
        ValueError: If ``seed`` is negative.
    """
    import torch

    gen = torch.Generator(device=device)
    if seed is None:
        gen.seed()
    else:
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        gen.manual_seed(int(seed))
    return gen
