"""Deterministic generators derived from (seed, round, client, stream): same in every process."""

from __future__ import annotations

import numpy as np
import torch

# stream ids
LOCAL = 1
COMPRESS = 2
NOISE = 3
SELECT = 4


def derived_seed(*keys: int) -> int:
    """Return a 63-bit seed that depends on every key (NumPy's SeedSequence hashing)."""
    state = np.random.SeedSequence([int(k) for k in keys]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def derived_generator(*keys: int, device: str | torch.device = "cpu") -> torch.Generator:
    """Return a ``torch.Generator`` seeded with :func:`derived_seed` of ``keys``."""
    gen = torch.Generator(device=device)
    gen.manual_seed(derived_seed(*keys))
    return gen
