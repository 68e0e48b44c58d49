"""Background distributions that define the interventional (baseline-masking) game.

A masker holds background rows ``b_1..b_B`` with weights ``w_j`` (summing to 1). For a row
``x`` and coalition ``S``, the game is ``v(S) = g(Σ_j w_j f(x_S, b_{j,~S}))``, the same game as
``shap.maskers.Independent`` with shap's exact / permutation explainers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from esensc._validation import is_dataframe, shap_subsample


def _to_2d_float(data: Any, name: str) -> NDArray[np.float64]:
    arr = np.asarray(data.to_numpy() if is_dataframe(data) else data)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    return arr.astype(np.float64, copy=False)


class Independent:
    """Background rows masked independently of each other (interventional game).

    Args:
        data: Background data, a 2-D array or DataFrame of shape (B, n) with B >= 1.
        max_samples: If ``data`` has more rows, a fixed random subset of this size is used:
            the rows ``shap.maskers.Independent`` keeps (``sklearn.utils.shuffle`` with
            ``random_state=seed``), so base values match shap's.
        weights: Optional non-negative weights per background row (normalised to sum 1).
        seed: Seed of the subsampling (default 0).

    Attributes:
        data: The background rows used, shape (B, n), float64.
        weights: Their weights, shape (B,), summing to one.
        feature_names: Column names when ``data`` was a DataFrame, else ``None``.

    Raises:
        ValueError: If the background is empty, not 2-D, not finite, or the weights are
            invalid; if ``max_samples`` < 1.
        TypeError: If the data is not numeric.
    """

    def __init__(
        self,
        data: ArrayLike,
        max_samples: int = 100,
        weights: ArrayLike | None = None,
        seed: int = 0,
    ) -> None:
        if isinstance(max_samples, bool) or not isinstance(max_samples, int | np.integer):
            raise TypeError(f"max_samples must be an int, got {max_samples!r}")
        if max_samples < 1:
            raise ValueError(f"max_samples must be >= 1, got {max_samples}")
        self.feature_names: list[str] | None = (
            [str(c) for c in data.columns] if is_dataframe(data) else None  # type: ignore[union-attr]
        )
        arr = _to_2d_float(data, "background data")
        if arr.ndim == 1:
            raise ValueError(
                f"background data must be 2-D (B, n_features), got shape {arr.shape}; "
                "use esensc.maskers.Baseline for a single baseline vector"
            )
        if arr.ndim != 2:
            raise ValueError(
                f"background data must be 2-D (B, n_features), got shape {arr.shape}; "
                "flatten images/sequences first"
            )
        if arr.shape[0] == 0 or arr.shape[1] == 0:
            raise ValueError(f"background data is empty: shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError("background data contains NaN or inf")
        if weights is None:
            w = np.full(arr.shape[0], 1.0 / arr.shape[0])
        else:
            w = np.asarray(weights, dtype=np.float64)
            if w.shape != (arr.shape[0],):
                raise ValueError(
                    f"weights must have shape ({arr.shape[0]},) to match the background, "
                    f"got {w.shape}"
                )
            if not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
                raise ValueError("weights must be finite, non-negative and not all zero")
            w = w / w.sum()
        if arr.shape[0] > max_samples:
            idx = shap_subsample(arr.shape[0], max_samples, seed)
            arr, w = arr[idx], w[idx] / w[idx].sum()
        self.data: NDArray[np.float64] = arr
        self.weights: NDArray[np.float64] = w

    @property
    def n_features(self) -> int:
        """Number of features n."""
        return int(self.data.shape[1])

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(B={len(self)}, n_features={self.n_features})"


class Baseline(Independent):
    """A single reference row: ``v(S) = g(f(x_S, baseline_~S))`` (B = 1).

    Args:
        values: The baseline vector of length n (or a (1, n) array).
    """

    def __init__(self, values: ArrayLike) -> None:
        arr = np.asarray(values)
        if arr.ndim == 1:
            arr = arr[None, :]
        super().__init__(arr, max_samples=1)


def as_masker(masker: Any, seed: int | None = None) -> Independent:
    """Turn the ``masker`` argument of the explainer into an :class:`Independent` masker.

    Accepts an esensc masker, a ``shap.maskers.Independent`` (its ``.data`` is read), a 2-D
    array or DataFrame (subsampled to 100 rows), or a 1-D baseline vector.

    Raises:
        TypeError: For anything else.
        ValueError: For empty or malformed data.
    """
    if isinstance(masker, Independent):
        return masker
    seed = 0 if seed is None else seed
    module = type(masker).__module__ or ""
    if module.startswith("shap.") and hasattr(masker, "data"):
        return Independent(np.asarray(masker.data), max_samples=len(masker.data), seed=seed)
    if masker is None:
        raise TypeError("masker must be background data or a masker, got None")
    if is_dataframe(masker):
        return Independent(masker, seed=seed)
    arr = np.asarray(masker)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(
            "masker must be a 2-D background array/DataFrame, a 1-D baseline, or an "
            f"esensc/shap Independent masker, got {type(masker).__name__}"
        )
    if arr.ndim == 1:
        return Baseline(arr)
    return Independent(arr, seed=seed)
