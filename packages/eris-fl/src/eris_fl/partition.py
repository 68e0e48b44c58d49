"""Per-round disjoint partitions of the coordinates among the aggregators (step 3)."""

from __future__ import annotations

import torch

from eris_fl._seeding import derived_generator

SCHEMES = ("random", "contiguous", "balanced")


class ShardPartitioner:
    """Assigns every coordinate to exactly one of ``A`` aggregators, per round.

    The assignment is a pure function of ``(seed, round, d)``, so every process computes
    the same partition without communicating.

    Schemes:
        * ``"random"``: i.i.d. uniform owner per coordinate (shard sizes ~ Binomial(d, 1/A)).
        * ``"contiguous"``: A consecutive blocks of size ⌊d/A⌋ or ⌈d/A⌉ (same every round).
        * ``"balanced"``: a random permutation cut into A parts of size ⌊d/A⌋ or ⌈d/A⌉.

    Args:
        num_aggregators: ``A >= 1``.
        scheme: One of ``"random"``, ``"contiguous"``, ``"balanced"``.
        seed: Shared seed, non-negative.

    Example:
        >>> p = ShardPartitioner(3, "balanced", seed=0)
        >>> p.masks(round=0, d=10).sum(0).tolist() == [1] * 10
        True
    """

    def __init__(self, num_aggregators: int, scheme: str = "random", seed: int = 0) -> None:
        if isinstance(num_aggregators, bool) or not isinstance(num_aggregators, int):
            raise TypeError(f"num_aggregators must be an int, got {num_aggregators!r}")
        if num_aggregators < 1:
            raise ValueError(f"num_aggregators must be >= 1, got {num_aggregators}")
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        self.num_aggregators: int = num_aggregators
        self.scheme: str = scheme
        self.seed: int = int(seed)

    def owner(self, round: int, d: int) -> torch.Tensor:
        """Return the owner (aggregator index in ``0..A-1``) of each of the ``d`` coordinates.

        Raises:
            ValueError: If ``d < 1`` or ``round < 0``.
        """
        if d < 1:
            raise ValueError(f"d must be >= 1, got {d}")
        if round < 0:
            raise ValueError(f"round must be >= 0, got {round}")
        A = self.num_aggregators
        if A == 1:
            return torch.zeros(d, dtype=torch.long)
        if self.scheme == "contiguous":
            return torch.arange(d, dtype=torch.long) * A // d
        gen = derived_generator(self.seed, round, 0x5A4D)
        if self.scheme == "random":
            return torch.randint(0, A, (d,), generator=gen, dtype=torch.long)
        perm = torch.randperm(d, generator=gen)
        owner = torch.empty(d, dtype=torch.long)
        owner[perm] = torch.arange(d, dtype=torch.long) % A
        return owner

    def masks(self, round: int, d: int) -> torch.Tensor:
        """Return the ``(A, d)`` boolean masks ``m^(a) = 1[owner = a]`` (disjoint, complete)."""
        owner = self.owner(round, d)
        return owner.unsqueeze(0) == torch.arange(self.num_aggregators).unsqueeze(1)

    def __repr__(self) -> str:
        return (
            f"ShardPartitioner(num_aggregators={self.num_aggregators}, "
            f"scheme={self.scheme!r}, seed={self.seed})"
        )
