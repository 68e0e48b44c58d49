r"""Closed-form attribution rules on the 2n + 2 coalition values (the paper's algorithm box).

Everything here is pure numpy and vectorised over any leading axes (explained rows, model
outputs); the feature axis is the last one.

Notation (one game per explained row and output):

* ``v0 = v(∅)``, ``vN = v(N)``, ``v_single[i] = v({i})``, ``v_minus[i] = v(N \ {i})``;
* stand-alone gain ``a_i = v({i}) - v(∅)``; last-in marginal gain ``b_i = v(N) - v(N \ {i})``;
* ES (equal surplus) ``a_i + (vN - v0 - Σ a_j) / n``; ENSC ``b_i + (vN - v0 - Σ b_j) / n``;
* midpoint ``m_i = (a_i + b_i) / 2``, the ES value of the self-dual game ``(v + v*) / 2``;
* ESENSC (the paper's "rev2"): the surplus of the midpoint is shared over the *active* features
  ``Act = {i : |a_i| > tol or |b_i| > tol}`` only, so null features get exactly 0.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import ArrayLike, NDArray

RULES = ("esensc", "es", "ensc", "esensc_plain", "proportional")


def validate_rule(rule: str) -> str:
    """Return ``rule`` if it is one of :data:`RULES`, else raise ValueError."""
    if not isinstance(rule, str) or rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    return rule


def validate_null_tol(null_tol: float) -> float:
    """Return ``null_tol`` as a finite float >= 0 (TypeError / ValueError otherwise)."""
    try:
        tol = float(null_tol)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"null_tol must be a float, got {null_tol!r}") from exc
    if not np.isfinite(tol) or tol < 0:
        raise ValueError(f"null_tol must be a finite number >= 0, got {null_tol!r}")
    return tol


def esensc_values(
    v0: ArrayLike,
    vN: ArrayLike,
    v_single: ArrayLike,
    v_minus: ArrayLike,
    rule: str = "esensc",
    null_tol: float = 1e-10,
) -> NDArray[np.float64]:
    r"""Attributions of a TU game from ``v(∅)``, ``v(N)``, ``v({i})`` and ``v(N\{i})``.

    With :math:`a_i = v(\{i\}) - v(\emptyset)`, :math:`b_i = v(N) - v(N\setminus\{i\})`,
    :math:`m_i = (a_i + b_i)/2` and the active set
    :math:`A = \{i : |a_i| > \tau \lor |b_i| > \tau\}`,

    .. math::

        \varphi_i = \mathbb{1}[i \in A]\Big(m_i + \frac{v(N) - v(\emptyset)
                     - \sum_{j \in A} m_j}{|A|}\Big),
        \qquad \tau = \text{null\_tol}\cdot\max(1, |v(\emptyset)|, |v(N)|).

    If no feature is active but :math:`v(N) \ne v(\emptyset)` (all effects are interactions of
    order >= 3 that no singleton or leave-one-out coalition sees), the surplus is split equally
    over all features and a ``RuntimeWarning`` is issued, so efficiency always holds.

    Args:
        v0: ``v(∅)``, shape broadcastable to the leading shape ``S`` of ``v_single``.
        vN: ``v(N)``, shape broadcastable to ``S``.
        v_single: ``v({i})``, shape ``S + (n,)``.
        v_minus: ``v(N \ {i})``, shape ``S + (n,)``.
        rule: ``"esensc"`` (default, midpoint with the null-player correction), ``"es"``,
            ``"ensc"``, ``"esensc_plain"`` (midpoint, no correction) or ``"proportional"``
            (experimental: the surplus is shared over active features in proportion to
            ``|m_i|``).
        null_tol: Relative tolerance deciding which features are null (>= 0).

    Returns:
        Attributions of shape ``S + (n,)``; they sum to ``vN - v0`` over the last axis.

    Raises:
        ValueError: If ``rule`` is unknown, ``null_tol`` is negative, shapes disagree or a value
            is not finite.
        TypeError: If ``null_tol`` is not a number.

    References:
        Hiraki, Ishihara, Kongo, Shino. "A Polynomial-Time Axiomatic Alternative to SHAP for
        Feature Attribution", arXiv:2603.00496, 2026 (formula inferred from the abstract).

    Example:
        >>> import numpy as np
        >>> esensc_values(0.0, 1.0, np.zeros(3), np.zeros(3)).round(3).tolist()
        [0.333, 0.333, 0.333]
    """
    rule = validate_rule(rule)
    tol_rel = validate_null_tol(null_tol)
    vs = np.asarray(v_single, dtype=np.float64)
    vm = np.asarray(v_minus, dtype=np.float64)
    if vs.ndim == 0 or vs.shape != vm.shape:
        raise ValueError(
            f"v_single and v_minus must have the same shape (..., n), got {vs.shape} and {vm.shape}"
        )
    lead = vs.shape[:-1]
    n = vs.shape[-1]
    if n == 0:
        raise ValueError("the game has no players (n = 0)")
    try:
        a0 = np.broadcast_to(np.asarray(v0, dtype=np.float64), lead)
        aN = np.broadcast_to(np.asarray(vN, dtype=np.float64), lead)
    except ValueError as exc:
        raise ValueError(
            f"v0 and vN must broadcast to the leading shape {lead} of v_single"
        ) from exc
    for name, arr in (("v0", a0), ("vN", aN), ("v_single", vs), ("v_minus", vm)):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or inf")

    surplus = aN - a0  # v(N) - v(∅)
    a = vs - a0[..., None]  # stand-alone gains
    b = aN[..., None] - vm  # last-in marginal gains
    if rule == "es":
        return a + ((surplus - a.sum(-1)) / n)[..., None]
    if rule == "ensc":
        return b + ((surplus - b.sum(-1)) / n)[..., None]
    m = 0.5 * (a + b)
    if rule == "esensc_plain":
        return m + ((surplus - m.sum(-1)) / n)[..., None]

    tol = tol_rel * np.maximum(1.0, np.maximum(np.abs(a0), np.abs(aN)))
    active = (np.abs(a) > tol[..., None]) | (np.abs(b) > tol[..., None])
    n_active = active.sum(-1)
    safe = np.maximum(n_active, 1)
    if rule == "esensc":
        share = (surplus - np.where(active, m, 0.0).sum(-1)) / safe
        phi = np.where(active, m + share[..., None], 0.0)
    else:  # proportional (experimental)
        weight = np.where(active, np.abs(m), 0.0)
        total = weight.sum(-1)
        # all-zero midpoints on the active set: fall back to an equal split over it
        equal = np.where(active, 1.0, 0.0) / safe[..., None]
        frac = np.where(
            (total > 0)[..., None], weight / np.where(total > 0, total, 1.0)[..., None], equal
        )
        phi = frac * surplus[..., None]

    degenerate = n_active == 0
    if np.any(degenerate):
        big = degenerate & (np.abs(surplus) > tol)
        if np.any(big):
            warnings.warn(
                f"{int(big.sum())} game(s) have no active feature (every singleton and "
                "leave-one-out coalition is worth the same as its complement) but "
                "v(N) != v(empty); the surplus is split equally over all features",
                RuntimeWarning,
                stacklevel=2,
            )
        phi = np.where(degenerate[..., None], (surplus / n)[..., None], phi)
    return phi
