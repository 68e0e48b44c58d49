"""Near-flat games: when most of an ESENSC attribution is the equal split of the surplus.

ESENSC gives feature i the midpoint ``m_i = (a_i + b_i)/2`` of its stand-alone gain
``a_i = v({i}) - v(∅)`` and last-in gain ``b_i = v(N) - v(N minus {i})``, plus an equal share of the
rest ``v(N) - v(∅) - Σ_j m_j``. When the model's output saturates (a probability near 0 or 1
at ``x``), one feature alone rarely moves the background's output and removing one feature
from ``x`` rarely moves ``x``'s: ``a_i ≈ b_i ≈ 0``, the game is near-flat around ∅ and N, and
the attributions come out nearly uniform. The log-odds (margin) scale usually restores the
gains. :func:`equal_split_share` measures this per row; the explainer warns when most rows are
dominated by it.
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import NDArray

FLAT_SHARE = 0.5  # a row is near-flat when over half its attribution mass is the equal split
FLAT_ROWS = 0.5  # warn when more than this fraction of rows is near-flat


def equal_split_share(
    v0: NDArray[np.float64],
    vN: NDArray[np.float64],
    v_single: NDArray[np.float64],
    v_minus: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Share of the attribution mass that is the equal split: ``|r| / (|r| + Σ_i |m_i|)``.

    ``r = v(N) - v(∅) - Σ_i m_i`` is the part of the surplus no singleton or leave-one-out
    gain accounts for. 0: the gains explain everything; 1: the attribution is uniform. A row
    with no surplus and no gains (a constant game) gets 0.

    Args:
        v0: ``v(∅)``, broadcastable to ``vN``.
        vN: ``v(N)``, shape (...).
        v_single: ``v({i})``, shape (..., n).
        v_minus: ``v(N minus {i})``, shape (..., n).

    Returns:
        The share per leading index, shape (...).
    """
    m = ((v_single - v0[..., None]) + (vN[..., None] - v_minus)) / 2
    rest = np.abs(vN - v0 - m.sum(-1))
    total = rest + np.abs(m).sum(-1)
    return np.divide(rest, total, out=np.zeros_like(total), where=total > 0)


def warn_if_flat(share: NDArray[np.float64], link: str, output: str) -> None:
    """Warn (``RuntimeWarning``) when most rows' games are near-flat, naming a better scale."""
    flat: NDArray[np.bool_] = np.asarray(share > FLAT_SHARE)
    if flat.ndim > 1:
        flat = np.asarray(flat.any(axis=tuple(range(1, flat.ndim))))
    if flat.size == 0 or flat.mean() <= FLAT_ROWS:
        return
    if link == "identity" and output in ("probability", "callable", "torch"):
        better = "if the output is a probability, explain the log-odds: link='logit'" + (
            " or model_output='margin'" if output == "probability" else ""
        )
    else:
        better = (
            "the game is dominated by interactions of order >= 3 on this scale; check a few "
            "rows against esensc.exact_shapley or a sampling SHAP estimator"
        )
    warnings.warn(
        f"{int(flat.sum())} of {flat.size} rows have near-flat games: over half of their "
        "attribution is the equal split of the surplus, so the attributions are nearly "
        f"uniform across features (saturated outputs?); {better}",
        RuntimeWarning,
        stacklevel=3,
    )
