"""shapiq's Shapley-value approximators on esensc's game, at a budget in coalitions per row.

The game of row x is ``v(S) = g(Σ_j w_j f(x_S, b_{j,~S}))`` (the same as esensc's and shap's
interventional explainers); shapiq calls it with boolean coalitions (k, n) and counts every
coalition it evaluates against ``budget``, ∅ and N included, as esensc's 2n + 2 does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

SHAPIQ_METHODS = ("KernelSHAP", "PermutationSamplingSV", "SVARM")


def _row_game(f: Callable[[Any], Any], bg: np.ndarray, x: np.ndarray, link: str) -> Callable:
    def game(coalitions: np.ndarray) -> np.ndarray:
        S = np.atleast_2d(np.asarray(coalitions, dtype=bool))
        Z = np.where(S[:, None, :], x[None, None, :], bg[None, :, :]).reshape(-1, len(x))
        p = np.asarray(f(Z), dtype=np.float64).reshape(len(S), len(bg)).mean(1)
        return p if link == "identity" else np.log(p) - np.log1p(-p)

    return game


def shapiq_values(
    method: str, f: Callable[[Any], Any], bg: np.ndarray, X: np.ndarray, budget: int, *,
    link: str = "identity", seed: int = 0,
) -> np.ndarray:  # fmt: skip
    """First-order values of shapiq's ``method`` for every row of ``X``: shape (rows, n)."""
    import shapiq

    cls = getattr(shapiq, method)
    out = np.empty(X.shape)
    for r, x in enumerate(X):
        approx = cls(n=X.shape[1], random_state=seed + r)
        iv = approx.approximate(budget=budget, game=_row_game(f, bg, x, link))
        out[r] = iv.get_n_order_values(1)
    return out
