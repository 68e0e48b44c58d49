"""The sampling SHAP baselines ESENSC is compared with, on the same game and budget (needs shap).

ESENSC evaluates 2n + 2 coalitions per explained row. These wrappers run shap's
``KernelExplainer`` and ``PermutationExplainer`` on the same interventional game (background
rows masked independently, the link applied after averaging, as with shap's
``linearize_link=False``) with a budget given in coalition evaluations per row, so the three
can be compared at equal cost: ``budget=esensc_budget(n)`` is "1x".
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from esensc._game import validate_link

_SHAP_HINT = "the shap baselines need shap: pip install 'esensc[shap]'"


def _shap() -> Any:
    try:  # optional dependency: esensc[shap]
        import shap
    except ImportError as exc:
        raise ImportError(_SHAP_HINT) from exc
    return shap


def _check_budget(budget: int) -> int:
    if isinstance(budget, bool) or not isinstance(budget, int | np.integer) or budget < 1:
        raise ValueError(f"budget must be an int >= 1 (coalitions per row), got {budget!r}")
    return int(budget)


def esensc_budget(n_features: int) -> int:
    """ESENSC's cost in coalition evaluations per explained row: ``2n + 2``."""
    return 2 * int(n_features) + 2


def kernel_shap(
    model: Any,
    background: ArrayLike,
    X: ArrayLike,
    budget: int,
    *,
    link: str = "identity",
    seed: int = 0,
    l1_reg: Any = "num_features(10)",
) -> NDArray[np.float64]:
    """KernelSHAP values with ``nsamples=budget`` coalitions per row.

    ``shap.KernelExplainer`` draws its coalitions from NumPy's global generator, so it is
    seeded with ``seed`` for the call and the caller's global state is restored afterwards.

    Args:
        model: Callable mapping an (m, n) array to (m,) outputs (probabilities for
            ``link="logit"``).
        background: Background rows (B, n).
        X: Rows to explain (rows, n).
        budget: Coalition evaluations per row (``nsamples``).
        link: ``"identity"`` or ``"logit"``.
        seed: Seed of the coalition sampling.
        l1_reg: shap's feature selection (its default ``"num_features(10)"``; ``False``
            for none).

    Returns:
        Attributions, (rows, n).

    Raises:
        ImportError: If shap is not installed (names the ``esensc[shap]`` extra).
        ValueError: For a budget < 1 or an unknown link.
    """
    shap = _shap()
    link, budget = validate_link(link), _check_budget(budget)
    state = np.random.get_state()  # noqa: NPY002 - KernelExplainer samples from the global RNG
    np.random.seed(seed)  # noqa: NPY002
    try:
        ke = shap.KernelExplainer(model, np.asarray(background), link=link)
        values = ke.shap_values(np.asarray(X), nsamples=budget, silent=True, l1_reg=l1_reg)
    finally:
        np.random.set_state(state)  # noqa: NPY002
    return np.asarray(values)


def permutation_shap(
    model: Any,
    background: ArrayLike,
    X: ArrayLike,
    budget: int,
    *,
    link: str = "identity",
    seed: int = 0,
) -> NDArray[np.float64]:
    """Permutation SHAP values with ``max_evals=budget`` coalitions per row.

    The first call compiles shap's numba kernels (10-30 s); time later calls only.

    Args:
        model: Callable mapping an (m, n) array to (m,) outputs (probabilities for
            ``link="logit"``).
        background: Background rows (B, n), all of them used (no subsampling).
        X: Rows to explain (rows, n).
        budget: Coalition evaluations per row (``max_evals``).
        link: ``"identity"`` or ``"logit"``.
        seed: Seed of the permutations.

    Returns:
        Attributions, (rows, n).

    Raises:
        ImportError: If shap is not installed (names the ``esensc[shap]`` extra).
        ValueError: For a budget < 1 or an unknown link.
    """
    shap = _shap()
    link, budget = validate_link(link), _check_budget(budget)
    bg = np.asarray(background)
    lk = shap.links.logit if link == "logit" else shap.links.identity
    pe = shap.PermutationExplainer(
        model, shap.maskers.Independent(bg, max_samples=len(bg)), link=lk, linearize_link=False,
        seed=seed,
    )  # fmt: skip
    return np.asarray(pe(np.asarray(X), max_evals=budget, silent=True).values)
