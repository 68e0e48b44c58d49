"""Configuration of an ERIS run and of the FedAvg reference."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from eris_fl.compress import Compressor
from eris_fl.partition import SCHEMES

_WEIGHTS = ("samples", "uniform")
_SELECTIONS = ("random", "round_robin")


def _check_common(
    server_lr: float, weights: str | Sequence[float], clients_per_round: int | None, seed: int
) -> None:
    if not (isinstance(server_lr, int | float) and math.isfinite(server_lr) and server_lr > 0):
        raise ValueError(f"server_lr must be a finite float > 0, got {server_lr!r}")
    if isinstance(weights, str):
        if weights not in _WEIGHTS:
            raise ValueError(f"weights must be one of {_WEIGHTS} or a list, got {weights!r}")
    elif any(not (math.isfinite(float(w)) and float(w) >= 0) for w in weights):
        raise ValueError(f"weights must be finite and >= 0, got {list(weights)}")
    if clients_per_round is not None and (
        isinstance(clients_per_round, bool)
        or not isinstance(clients_per_round, int)
        or clients_per_round < 1
    ):
        raise ValueError(
            f"clients_per_round must be None or an int >= 1, got {clients_per_round!r}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")


@dataclass(frozen=True)
class ERISConfig:
    """Settings of Federated Shard Aggregation with optional Distributed Shifted Compression.

    Attributes:
        num_aggregators: ``A``, aggregators per round, chosen among the participating clients.
        partition: Sharding scheme, ``"random"``, ``"contiguous"`` or ``"balanced"``.
        compressor: Unbiased compressor for DSC, or ``None`` for no DSC (exact FedAvg).
        shift_alpha: DSC shift step; ``None`` means ``1/(1+omega)``.
        server_lr: ``lambda``, step on the aggregate (1.0 = FedAvg).
        aggregator_selection: ``"random"``, ``"round_robin"`` or a fixed list of client ids.
        weights: ``"samples"`` (``p_k = n_k / sum n``), ``"uniform"``, or one non-negative
            number per client (normalised over the round's participants).
        clients_per_round: Clients sampled per round (``None`` = all; partial participation).
        allow_biased: Permit a biased compressor (e.g. top-k) with DSC.
        trainable_only: Share only parameters with ``requires_grad``.
        include_buffers: Share floating-point buffers (BatchNorm statistics) too.
        seed: Seed of every shared random choice (partitions, selection, compression).
    """

    num_aggregators: int = 4
    partition: str = "random"
    compressor: Compressor | None = None
    shift_alpha: float | None = None
    server_lr: float = 1.0
    aggregator_selection: str | Sequence[int] = "random"
    weights: str | Sequence[float] = "samples"
    clients_per_round: int | None = None
    allow_biased: bool = False
    trainable_only: bool = True
    include_buffers: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        A = self.num_aggregators
        if isinstance(A, bool) or not isinstance(A, int) or A < 1:
            raise ValueError(f"num_aggregators must be an int >= 1, got {A!r}")
        if self.partition not in SCHEMES:
            raise ValueError(f"partition must be one of {SCHEMES}, got {self.partition!r}")
        if self.compressor is not None and not isinstance(self.compressor, Compressor):
            raise TypeError(
                f"compressor must be an eris_fl.compress.Compressor or None, "
                f"got {type(self.compressor).__name__}"
            )
        if self.compressor is not None and not self.compressor.unbiased and not self.allow_biased:
            raise ValueError(
                f"{self.compressor!r} is biased; DSC assumes an unbiased compressor "
                "(pass allow_biased=True to use it anyway)"
            )
        if self.shift_alpha is not None and not (
            math.isfinite(self.shift_alpha) and self.shift_alpha > 0
        ):
            raise ValueError(f"shift_alpha must be > 0, got {self.shift_alpha}")
        sel = self.aggregator_selection
        if isinstance(sel, str):
            if sel not in _SELECTIONS:
                raise ValueError(
                    f"aggregator_selection must be one of {_SELECTIONS} or a list of client "
                    f"ids, got {sel!r}"
                )
        elif len(sel) != A or len(set(sel)) != A:
            raise ValueError(
                f"aggregator_selection as a list needs {A} distinct client ids, got {list(sel)}"
            )
        _check_common(self.server_lr, self.weights, self.clients_per_round, self.seed)
        if self.compressor is not None and self.clients_per_round is not None:
            raise NotImplementedError(
                "DSC with partial participation (clients_per_round) is not implemented: the "
                "public shift would need DIANA's partial-participation correction"
            )

    @property
    def uses_dsc(self) -> bool:
        """Whether Distributed Shifted Compression is on."""
        return self.compressor is not None


@dataclass(frozen=True)
class FedAvgConfig:
    """The centralised reference: a server averages full (or compressed, unshifted) updates.

    Attributes:
        server_lr: Step on the average (1.0 = FedAvg).
        weights: ``"samples"``, ``"uniform"`` or one number per client.
        compressor: Compress each update without a shift (rand-k / top-k baselines).
        clip: Local DP baseline: clip each update to this L2 norm (``None`` = off).
        noise_multiplier: Local DP baseline: add N(0, (noise_multiplier * clip)^2) per coordinate.
        clients_per_round: Clients sampled per round (``None`` = all).
        trainable_only: Share only parameters with ``requires_grad``.
        include_buffers: Share floating-point buffers too.
        seed: Seed of the shared random choices.
    """

    server_lr: float = 1.0
    weights: str | Sequence[float] = "samples"
    compressor: Compressor | None = None
    clip: float | None = None
    noise_multiplier: float = 0.0
    clients_per_round: int | None = None
    trainable_only: bool = True
    include_buffers: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        _check_common(self.server_lr, self.weights, self.clients_per_round, self.seed)
        if self.clip is not None and not self.clip > 0:
            raise ValueError(f"clip must be None or > 0, got {self.clip}")
        if self.noise_multiplier < 0:
            raise ValueError(f"noise_multiplier must be >= 0, got {self.noise_multiplier}")
        if self.noise_multiplier > 0 and self.clip is None:
            raise ValueError("noise_multiplier > 0 needs clip (the noise scale is sigma * clip)")
