"""ESENSCExplainer: the paper's algorithm box (model + masker in, Explanation out)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from esensc._game import (
    apply_link,
    coalition_values,
    empty_value,
    leave_one_out_builder,
    validate_link,
)
from esensc._models import model_function
from esensc._rules import esensc_values, validate_null_tol, validate_rule
from esensc._validation import is_dataframe, validate_batch_size
from esensc.diagnostics import equal_split_share, warn_if_flat
from esensc.explanation import explanation_class
from esensc.maskers import as_masker

logger = logging.getLogger(__name__)


class ESENSCExplainer:
    r"""Explain a model with ESENSC attributions from 2n + 2 coalition values per row.

    Algorithm (per explained row ``x``; background ``b_1..b_B`` with weights ``w_j``):

    1. ``v(S) = g(Σ_j w_j f(x_S, b_{j,~S}))`` for ``S = ∅`` (once, shared by all rows),
       ``{i}``, ``N \ {i}`` (i = 1..n) and ``N``: ``(2n + 1)·B`` model rows per row, + B once.
    2. ``a_i = v({i}) - v(∅)``, ``b_i = v(N) - v(N\{i})``, ``m_i = (a_i + b_i)/2``.
    3. Active set ``A = {i : |a_i| > τ or |b_i| > τ}``; for ``i ∈ A``

       .. math:: \varphi_i = m_i + \frac{v(N) - v(\emptyset) - \sum_{j\in A} m_j}{|A|},

       and ``φ_i = 0`` for null features (see :func:`esensc.esensc_values`).

    The result is efficient (``Σ φ_i = v(N) - v(∅)``), deterministic, and equals the exact
    Shapley value when n <= 3 or when the game has no interaction of order >= 3.

    By default the explained output is the one ``shap.Explainer(model, background)`` explains
    (``model_output="auto"``): the margin of boosters (XGBoost, LightGBM, CatBoost, scikit-learn
    gradient boosting) and of linear models, the class probabilities of scikit-learn forests,
    ``predict_proba`` of other classifiers and pipelines, ``predict`` of other regressors, and
    callables and torch modules as they are.

    Args:
        model: A callable mapping an (m, n) array (a DataFrame if the background was one) to
            (m,) or (m, k) outputs; or an estimator (scikit-learn, XGBoost, LightGBM, CatBoost,
            pipelines); or a torch ``nn.Module`` (run under ``torch.no_grad()`` on its own
            device and dtype). The arrays a callable receives are read-only views of a buffer
            that esensc reuses between calls: a model must not write into its input (numpy
            raises if it tries; copy first), and ``torch.as_tensor`` on them warns once per
            process (use ``torch.tensor``, which copies).
        masker: Background: an :class:`esensc.maskers.Independent`, a
            ``shap.maskers.Independent``, a 2-D array/DataFrame (subsampled to 100 rows) or a
            1-D baseline vector.
        link: ``"identity"`` or ``"logit"`` (applied after averaging, like shap with
            ``linearize_link=False``).
        feature_names: Names of the n features (default: DataFrame columns, if any).
        rule: ``"esensc"`` (default), ``"es"``, ``"ensc"``, ``"esensc_plain"`` or
            ``"proportional"`` (experimental).
        null_tol: Relative tolerance for calling a feature null (>= 0).
        batch_size: Maximum model rows per model call (default: about 4M input elements).
        seed: Seed for subsampling a background with more than 100 rows (default 0).
        model_output: ``"auto"`` (shap's default output for the model kind), ``"margin"``
            (raw score / decision function / linear predictor), ``"probability"``
            (``predict_proba``) or ``"predict"``; estimators only.

    Attributes:
        masker: The background masker.
        model_output: The output explained: ``"margin"``, ``"probability"``, ``"predict"``,
            ``"callable"`` or ``"torch"``.
        expected_value: ``v(∅)``, the base value, set by the first call (float or (k,)).
        equal_split_share: Per explained row of the last call, the share of its attribution
            that is the equal split of the surplus (see :mod:`esensc.diagnostics`); a
            ``RuntimeWarning`` names a better link when most rows exceed 0.5.

    Raises:
        ValueError: For an unknown ``rule`` or ``link``, negative ``null_tol``, empty background.
        TypeError: For a model that is neither callable nor an estimator.

    References:
        Hiraki, Ishihara, Kongo, Shino. "A Polynomial-Time Axiomatic Alternative to SHAP for
        Feature Attribution", arXiv:2603.00496, 2026.

    Example:
        >>> import numpy as np
        >>> ex = ESENSCExplainer(lambda Z: Z @ np.array([1.0, 2.0]), np.zeros((4, 2)))
        >>> ex.attribute(np.array([[1.0, 1.0]])).tolist()
        [[1.0, 2.0]]
    """

    def __init__(
        self,
        model: Any,
        masker: Any,
        *,
        link: str = "identity",
        feature_names: Sequence[str] | None = None,
        rule: str = "esensc",
        null_tol: float = 1e-10,
        batch_size: int | None = None,
        seed: int | None = None,
        model_output: str = "auto",
    ) -> None:
        self.rule: str = validate_rule(rule)
        self.link: str = validate_link(link)
        self.null_tol: float = validate_null_tol(null_tol)
        self.batch_size: int | None = validate_batch_size(batch_size)
        self.model: Any = model
        self._f, self.model_output = model_function(model, model_output)
        self.masker = as_masker(masker, seed)
        n = self.masker.n_features
        if feature_names is not None:
            feature_names = [str(x) for x in feature_names]
            if len(feature_names) != n:
                raise ValueError(
                    f"feature_names has {len(feature_names)} names but the background has "
                    f"{n} features"
                )
        self.feature_names: list[str] | None = feature_names or self.masker.feature_names
        self.expected_value: Any = None
        self.equal_split_share: NDArray[np.float64] | None = None
        self._empty: tuple[NDArray[np.float64], bool] | None = None

    @property
    def n_features(self) -> int:
        """Number of features n."""
        return self.masker.n_features

    def n_model_evals(self, n_rows: int) -> int:
        """Model rows needed to explain ``n_rows`` rows: ``(2n + 1)·B·n_rows + B``."""
        B = len(self.masker)
        return (2 * self.n_features + 1) * B * int(n_rows) + B

    def _prepare(self, X: Any) -> NDArray[np.float64]:
        arr = np.asarray(X.to_numpy() if is_dataframe(X) else X)
        if arr.dtype == object or arr.dtype.kind not in "biuf":
            raise TypeError(f"X must be numeric, got dtype {arr.dtype}")
        arr = arr.astype(np.float64, copy=False)
        if arr.ndim == 1:
            arr = arr[None, :]
        if arr.ndim != 2:
            raise ValueError(
                f"X must be 2-D (rows, n_features), got shape {arr.shape}. ESENSC explains "
                "tabular inputs; for images or sequences flatten them and wrap the model, e.g. "
                "Explainer(lambda Z: model(Z.reshape(-1, *shape)), "
                "background.reshape(len(background), -1))"
            )
        if arr.shape[1] != self.n_features:
            raise ValueError(
                f"X has {arr.shape[1]} features per row but the background has {self.n_features}"
            )
        return arr

    def _raw_values(
        self, Xa: NDArray[np.float64], batch_size: int | None, progress: bool | None = None
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], bool]:
        n = self.n_features
        cols = self.masker.feature_names
        if self._empty is None:
            self._empty = empty_value(
                self._f, self.masker.data, self.masker.weights, cols, batch_size
            )
        raw_empty, one_d = self._empty

        C = 2 * n + 1

        def describe(q: int) -> str:
            r, c = divmod(q, C)
            if c < n:
                what = f"single-feature coalition {{{c}}}"
            elif c < 2 * n:
                what = f"leave-one-out coalition N\\{{{c - n}}}"
            else:
                what = "grand coalition N"
            return f"{what} of explained row {r}"

        bg = self.masker.data
        raw = coalition_values(
            self._f, leave_one_out_builder(Xa, bg), len(Xa) * C, bg, self.masker.weights,
            describe, cols, batch_size, progress,
        ).reshape(len(Xa), C, -1)  # fmt: skip
        if raw.shape[2] != raw_empty.shape[0]:
            raise ValueError(
                f"model returned {raw.shape[2]} outputs on masked rows but "
                f"{raw_empty.shape[0]} on the background"
            )
        v0 = apply_link(raw_empty, self.link, "empty coalition")
        v = apply_link(np.moveaxis(raw, 1, -1), self.link, "masked coalitions")  # (rows, k, C)
        return v0, v, one_d

    def attribute(
        self, X: ArrayLike, *, batch_size: int | None = None, progress: bool | None = None
    ) -> NDArray[np.float64]:
        """Attributions as an array: (rows, n), or (rows, n, k) for a k-output model.

        Args:
            X: Rows to explain, (rows, n) array or DataFrame (a 1-D row is one row).
            batch_size: Overrides the explainer's ``batch_size`` for this call.
            progress: A bar over the model calls: ``None`` (default) on a terminal only,
                ``True`` always, ``False`` never.

        Returns:
            The attributions; each row sums to ``v(N) - v(∅)`` per output.
        """
        values, _, _ = self._explain(X, batch_size, progress)
        return values

    def shap_values(self, X: ArrayLike) -> NDArray[np.float64]:
        """Legacy shap-style alias of :meth:`attribute`."""
        return self.attribute(X)

    def _explain(
        self, X: Any, batch_size: int | None, progress: bool | None = None
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        bs = validate_batch_size(batch_size) if batch_size is not None else self.batch_size
        Xa = self._prepare(X)
        n = self.n_features
        v0, v, one_d = self._raw_values(Xa, bs, progress)
        vN, v_single, v_minus = v[..., 2 * n], v[..., :n], v[..., n : 2 * n]
        phi = esensc_values(v0[None, :], vN, v_single, v_minus, self.rule, self.null_tol)
        share = equal_split_share(v0[None, :], vN, v_single, v_minus)  # (rows, k)
        self.equal_split_share = share[:, 0] if one_d else share
        warn_if_flat(share, self.link, self.model_output)
        phi = np.moveaxis(phi, -1, 1)  # (rows, k, n) -> (rows, n, k)
        base = np.broadcast_to(v0, (Xa.shape[0], v0.shape[0])).copy()
        self.expected_value = float(v0[0]) if one_d else v0.copy()
        if one_d:
            return phi[..., 0], base[:, 0], Xa
        return phi, base, Xa

    def __call__(
        self, X: ArrayLike, *, batch_size: int | None = None, progress: bool | None = None
    ) -> Any:
        """Explain rows ``X`` and return an ``esensc.Explanation``.

        Args:
            X: Rows to explain, (rows, n) array or DataFrame.
            batch_size: Overrides the explainer's ``batch_size`` for this call.
            progress: A bar over the model calls: ``None`` (default) on a terminal only,
                ``True`` always, ``False`` never.

        Returns:
            Explanation with ``values`` (rows, n[, k]), ``base_values`` (rows[, k]) and
            ``data`` (rows, n): an ``esensc.Explanation``, which subclasses
            ``shap.Explanation`` when shap is installed.
        """
        values, base, data = self._explain(X, batch_size, progress)
        return explanation_class()(
            values=values,
            base_values=base,
            data=data,
            feature_names=self.feature_names,
        )


Explainer = ESENSCExplainer
