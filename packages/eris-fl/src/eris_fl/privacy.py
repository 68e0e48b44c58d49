"""What one aggregator observes: the exposure fraction and the leakage bound built on it."""

from __future__ import annotations


def exposure_fraction(num_aggregators: int, ratio: float = 1.0) -> float:
    """Fraction of a client's update coordinates one aggregator sees: ``q / A``.

    Args:
        num_aggregators: ``A >= 1``.
        ratio: Fraction ``q`` of coordinates a client sends (rand-k ratio; 1 without DSC).

    Raises:
        ValueError: If ``A < 1`` or ``ratio`` is outside (0, 1].
    """
    if num_aggregators < 1:
        raise ValueError(f"num_aggregators must be >= 1, got {num_aggregators}")
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"compression ratio must be in (0, 1], got {ratio}")
    return ratio / num_aggregators


def leakage_bound(num_aggregators: int, ratio: float, full_leakage: float) -> float:
    """Bound on one aggregator's leakage: ``(q / A) * full_leakage`` (constant inferred).

    The paper bounds the mutual information an observer gets by the observable fraction of
    each update times the leakage of the full update; the exact constant is not in the
    abstract, so this linear form is an inference.

    Raises:
        ValueError: As :func:`exposure_fraction`, or if ``full_leakage < 0``.
    """
    if full_leakage < 0:
        raise ValueError(f"full_leakage must be >= 0, got {full_leakage}")
    return exposure_fraction(num_aggregators, ratio) * full_leakage
