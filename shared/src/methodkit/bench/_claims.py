"""Claims whose verdict cannot pass on missing input: NaN, None or degenerate is "not measured".

A claim such as "ours <= baseline" is true for a NaN baseline under ``not ours > baseline``,
and "ours >= SFT" holds at 0 % against 0 % without telling anything. :func:`check` and
:func:`compare` decide the verdict and keep the numbers it rests on, so that
:func:`~methodkit.bench.run_suite` can refuse a pass that rests on nothing.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Sequence

from methodkit.bench._record import Claim

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _finite(x: object) -> bool:
    if x is None or isinstance(x, bool):
        return False
    try:
        return math.isfinite(float(x))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def missing_inputs(inputs: Sequence[object]) -> bool:
    """True when any input is None, NaN, infinite or not a number."""
    return not all(_finite(x) for x in inputs)


_NON_FINITE_WORD = re.compile(r"(?<![a-z])(nan|[+-]?inf(inity)?)(?![a-z])", re.IGNORECASE)


def _verdict_value(passed: object) -> bool | None:
    """``passed`` as a bool; a NaN/None "verdict" (``bool(nan)`` is True) is no verdict."""
    if passed is None:
        return None
    if isinstance(passed, float) and not math.isfinite(passed):
        return None
    return bool(passed)


def check(
    text: str,
    passed: bool,
    measured: str = "",
    *,
    inputs: Sequence[float | None] = (),
    degenerate: bool = False,
    quick: bool = False,
) -> Claim:
    """A claim with the verdict ``passed``, unless its inputs make it unmeasured.

    A comparison with NaN is False, so ``not (nan > x)`` "holds": give every number the verdict
    rests on in ``inputs``. Without ``inputs`` the ``measured`` text is the evidence, and a
    ``nan`` or ``inf`` in it makes the claim "not measured" as well.

    Args:
        text: What is claimed.
        passed: The verdict computed by the caller from ``inputs``.
        measured: The measured value(s) as text.
        inputs: Every number the verdict rests on; one that is missing, NaN or infinite
            makes the claim "not measured".
        degenerate: The caller's own "these inputs cannot tell" (for example a quick run too
            small to measure memory); also makes the claim "not measured".
        quick: Also judged on ``--quick`` runs (an exactness or contract claim that holds at
            any scale). Other claims of a quick run are recorded as "full run only".

    Returns:
        The claim; ``passed`` is None when not measured.

    Example:
        >>> check("loss <= 1", float("nan") <= 1.0, "nan").status
        'not measured'
        >>> check("loss <= 1", 0.5 <= 1.0, inputs=[0.5]).status
        'held'
    """
    verdict = _verdict_value(passed)
    if degenerate or missing_inputs(inputs):
        verdict = None
    if not inputs and _NON_FINITE_WORD.search(measured or ""):
        verdict = None
    return Claim(text, verdict, measured, tuple(_as_float(x) for x in inputs), quick=quick)


def _as_float(x: object) -> float | None:
    return float(x) if _finite(x) else None  # type: ignore[arg-type]


def compare(
    text: str,
    value: float | None,
    op: str,
    reference: float | None,
    *,
    scale: float = 1.0,
    margin: float = 0.0,
    measured: str | None = None,
    quick: bool = False,
) -> Claim:
    """Claim ``value op scale * reference + margin`` between two measured quantities.

    Both sides exactly zero is degenerate (two methods at the floor, or a metric that was
    never exercised) and gives "not measured", as does a missing or NaN side. For a claim
    against a fixed threshold pass the threshold as ``reference`` with ``margin=0`` only
    if zero is a meaningful value for it; otherwise use :func:`check`.

    Args:
        text: What is claimed.
        value: The measured quantity on the left.
        op: One of ``<``, ``<=``, ``>``, ``>=``.
        reference: The measured quantity it is compared with.
        scale: Factor on ``reference``.
        margin: Added to ``scale * reference``.
        measured: Text for the record (default: ``"value vs reference"``).
        quick: Also judged on ``--quick`` runs (see :func:`check`).

    Returns:
        The claim.

    Raises:
        ValueError: If ``op`` is not one of the four comparisons.
    """
    if op not in _OPS:
        raise ValueError(f"op must be one of {sorted(_OPS)}, got {op!r}")
    if measured is None:
        measured = f"{_fmt(value)} vs {_fmt(reference)}"
    if missing_inputs([value, reference]):
        return check(text, False, measured, inputs=(value, reference), quick=quick)
    v, r = float(value), float(reference)  # type: ignore[arg-type]  # both finite here
    passed = _OPS[op](v, scale * r + margin)
    return check(
        text, passed, measured, inputs=(value, reference), degenerate=v == r == 0, quick=quick
    )


def _fmt(x: float | None) -> str:
    return "missing" if not _finite(x) else f"{float(x):.4g}"  # type: ignore[arg-type]
