"""Brute-force Shapley values of the same interventional game (reference for tests/benchmarks)."""

from __future__ import annotations

from math import factorial
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from esensc._game import apply_link, coalition_values, empty_value, mask_builder, validate_link
from esensc._models import model_function
from esensc.maskers import as_masker

MAX_EXACT_FEATURES = 16


def shapley_from_values(v: ArrayLike) -> NDArray[np.float64]:
    r"""Exact Shapley values from all :math:`2^n` coalition values.

    .. math:: \varphi_i = \sum_{S \subseteq N\setminus\{i\}}
              \frac{|S|!\,(n-|S|-1)!}{n!}\,\big(v(S\cup\{i\}) - v(S)\big)

    Args:
        v: Coalition values with the coalition on the last axis, shape ``(..., 2**n)``;
            coalition ``S`` sits at index ``sum(2**i for i in S)``.

    Returns:
        Shapley values, shape ``(..., n)``.

    Raises:
        ValueError: If the last axis is not a power of two.
    """
    arr = np.asarray(v, dtype=np.float64)
    size = arr.shape[-1]
    n = size.bit_length() - 1
    if size < 2 or (1 << n) != size:
        raise ValueError(f"the last axis must have length 2**n with n >= 1, got {size}")
    sets = np.arange(size)
    card = np.array([bin(s).count("1") for s in range(size)])
    weight = np.array([factorial(k) * factorial(n - k - 1) / factorial(n) for k in range(n)])
    phi = np.empty((*arr.shape[:-1], n))
    for i in range(n):
        without = sets[(sets >> i) & 1 == 0]
        diff = arr[..., without | (1 << i)] - arr[..., without]
        phi[..., i] = diff @ weight[card[without]]
    return phi


def game_values(
    model: Any,
    masker: Any,
    X: ArrayLike,
    *,
    link: str = "identity",
    batch_size: int | None = None,
    model_output: str = "auto",
    progress: bool | None = None,
) -> tuple[NDArray[np.float64], bool]:
    """All 2^n coalition values ``v(S)`` of the interventional game of each row.

    Coalition ``S`` is indexed by its bitmask (bit i set: feature i takes the explained value).
    Uses ``rows * (2**n - 1) * B`` model rows (+ B for the empty coalition).

    Args:
        model: Callable, estimator or torch module (as for :class:`esensc.Explainer`).
        masker: Background data or masker (as for :class:`esensc.Explainer`).
        X: Rows to explain, (rows, n).
        link: ``"identity"`` or ``"logit"``, applied after averaging over the background.
        batch_size: Maximum model rows per call.
        model_output: Which output of an estimator (as for :class:`esensc.Explainer`).
        progress: A bar over the model calls: ``None`` (default) on a terminal only,
            ``True`` always, ``False`` never.

    Returns:
        ``(v, one_d)``: values of shape (rows, k, 2**n), and whether the model output is 1-D.

    Raises:
        ValueError: If n > 16 or the inputs are malformed.
    """
    link = validate_link(link)
    m = as_masker(masker)
    Xa = np.asarray(X, dtype=np.float64)
    if Xa.ndim != 2 or Xa.shape[1] != m.n_features:
        raise ValueError(
            f"X must have shape (rows, {m.n_features}) to match the background, got {Xa.shape}"
        )
    n = Xa.shape[1]
    if n > MAX_EXACT_FEATURES:
        raise ValueError(f"exact_shapley enumerates 2**n coalitions; n={n} > {MAX_EXACT_FEATURES}")
    f, _ = model_function(model, model_output)
    cols = m.feature_names
    masks = ((np.arange(1, 1 << n)[:, None] >> np.arange(n)) & 1).astype(bool)
    C = len(masks)
    raw_empty, one_d = empty_value(f, m.data, m.weights, cols, batch_size)
    raw = coalition_values(
        f, mask_builder(Xa, m.data, masks), len(Xa) * C, m.data, m.weights,
        lambda q: f"coalition #{q % C + 1} of explained row {q // C}", cols, batch_size,
        progress,
    ).reshape(len(Xa), C, -1)  # fmt: skip
    allv = np.concatenate([np.broadcast_to(raw_empty, (len(Xa), 1, raw.shape[2])), raw], axis=1)
    return np.moveaxis(apply_link(allv, link, "coalition values"), 1, -1), one_d


def exact_shapley(
    model: Any,
    masker: Any,
    X: ArrayLike,
    *,
    link: str = "identity",
    batch_size: int | None = None,
    model_output: str = "auto",
    progress: bool | None = None,
) -> NDArray[np.float64]:
    """Exact Shapley values of the interventional game by enumerating all 2^n coalitions.

    Uses ``rows * 2**n * B`` model rows (+ B for the empty coalition), so it is meant for
    n <= 16 (tests and benchmark ground truth). The arguments are those of
    :func:`game_values`.

    Returns:
        Shapley values, (rows, n) for a model with 1-D output, else (rows, n, k).

    Raises:
        ValueError: If n > 16 or the inputs are malformed.
    """
    v, one_d = game_values(
        model, masker, X, link=link, batch_size=batch_size, model_output=model_output,
        progress=progress,
    )  # fmt: skip
    phi = np.moveaxis(shapley_from_values(v), -1, 1)  # (rows, k, n) -> (rows, n, k)
    return phi[..., 0] if one_d else phi
