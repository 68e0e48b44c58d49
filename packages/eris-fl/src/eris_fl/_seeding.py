"""Deterministic generators derived from (seed, round, client, stream): same in every process.

Every rank must draw the same partition, aggregator choice and compression mask from the run
seed alone, so each random choice is keyed by ``(seed, round, client, stream)``. The keys are
mixed by NumPy's ``SeedSequence`` hash and the generator itself is made by
:func:`methodkit.torch.generator`. The mixing is kept (rather than
:func:`methodkit.derive_seed`) because it defines the random streams of the committed
benchmark records: changing it would change every partition and mask they were run with.
"""

from __future__ import annotations

import numpy as np
import torch

from methodkit.torch import generator

# stream ids
LOCAL = 1
COMPRESS = 2
NOISE = 3
SELECT = 4


def derived_seed(*keys: int) -> int:
    """Return a 63-bit seed that depends on every key (NumPy's SeedSequence hashing)."""
    state = np.random.SeedSequence([int(k) for k in keys]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def derived_generator(*keys: int, device: str | torch.device | None = None) -> torch.Generator:
    """Return ``methodkit.torch.generator`` seeded with :func:`derived_seed` of ``keys``."""
    return generator(derived_seed(*keys), device=device)
