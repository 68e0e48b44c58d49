"""Weather decomposition: climatological baseline, standardised anomaly, cumulative stress.

``B_t = a_0 + sum_h a_h cos(2 pi h d_t / 365) + b_h sin(2 pi h d_t / 365)`` per variable (least
squares), ``A_t = (W_t - B_t) / sigma(d_t)`` with ``sigma^2`` the same harmonic fit on squared
residuals, and leaky integrators of the anomalies in the damaging direction (the stress form is
*inferred*: the paper names cumulative heat and drought stress without its formula).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import NotFittedError

from eo_wm._validation import check_doy

_MIN_VAR = 1e-6


def harmonic_design(doy: ArrayLike, n_harmonics: int) -> np.ndarray:
    """Design matrix ``[1, cos(2 pi h d/365), sin(2 pi h d/365)]_{h=1..H}`` of shape (..., 2H+1)."""
    d = np.asarray(doy, dtype=np.float64)[..., None]
    h = np.arange(1, n_harmonics + 1, dtype=np.float64)
    ang = 2.0 * np.pi * h * d / 365.0
    return np.concatenate([np.ones_like(d), np.cos(ang), np.sin(ang)], axis=-1)


def cumulative_stress(
    anomaly: ArrayLike,
    decays: Sequence[float] = (0.7, 0.9),
    threshold: float = 0.0,
    spin_up: ArrayLike | None = None,
) -> np.ndarray:
    r"""Leaky integrators ``S_t = lam S_{t-1} + max(0, a_t - tau)`` along the time axis (-2).

    Args:
        anomaly: Signed driving anomalies (already oriented so that positive is damaging),
            shape ``(..., T, k)``.
        decays: Memories ``lam`` in ``(0, 1)``; one integrator per (variable, decay).
        threshold: ``tau``; only exceedances above it accumulate.
        spin_up: Optional anomalies of steps before the first one ``(..., T0, k)`` that warm
            the integrators up; they are not returned.

    Returns:
        ``(..., T, k * len(decays))``, variable-major (all decays of variable 0 first). Step
        ``t`` depends on steps ``<= t`` only.

    Raises:
        ValueError: If a decay is outside ``(0, 1)`` or ``anomaly`` has fewer than 2 dims.
    """
    a = np.asarray(anomaly, dtype=np.float64)
    if a.ndim < 2:
        raise ValueError(f"anomaly must have shape (..., T, k), got {a.shape}")
    lams = np.asarray(decays, dtype=np.float64)
    if lams.ndim != 1 or lams.size == 0 or np.any((lams <= 0) | (lams >= 1)):
        raise ValueError(f"decays must be a non-empty list of values in (0, 1), got {decays}")
    if spin_up is not None:
        a = np.concatenate([np.asarray(spin_up, dtype=np.float64), a], axis=-2)
    drive = np.maximum(0.0, a - threshold)[..., None]  # (..., T, k, 1)
    out = np.empty((*drive.shape[:-1], lams.size))
    state = np.zeros(drive.shape[:-3] + drive.shape[-2:-1] + (lams.size,))
    for t in range(a.shape[-2]):
        state = lams * state + drive[..., t, :, :]
        out[..., t, :, :] = state
    out = out.reshape((*out.shape[:-2], -1))
    if spin_up is not None:
        out = out[..., np.asarray(spin_up).shape[-2] :, :]
    return out


def _is_dataset(W: Any) -> bool:
    return hasattr(W, "data_vars") and hasattr(W, "dims")


def _named_array(
    W: Any, names: Sequence[str] | None, arg: str = "W"
) -> tuple[Any, list[str] | None]:
    """A Dataset's data variables or a DataFrame's columns as the last axis, by name.

    ``names``: the variables to take, in that order (None: all, in the input's order). Any
    other input comes back unchanged with ``None``.
    """
    if _is_dataset(W):
        keys = {str(k): k for k in W.data_vars}
    elif hasattr(W, "columns") and hasattr(W, "to_numpy"):
        keys = {str(k): k for k in W.columns}
    else:
        return W, None
    want = list(names) if names is not None else list(keys)
    missing = [v for v in want if v not in keys]
    if missing:
        raise ValueError(f"{arg} lacks the variable(s) {missing} (it has {list(keys)})")
    cols = [np.asarray(W[keys[v]], dtype=np.float64) for v in want]
    if len({c.shape for c in cols}) > 1:
        shapes = {v: c.shape for v, c in zip(want, cols, strict=True)}
        raise ValueError(f"{arg}'s variables must share one shape, got {shapes}")
    return np.stack(cols, -1), want


def _require_xarray() -> Any:
    try:
        import xarray  # optional dependency (eo-wm[xarray]), imported on use
    except ImportError as err:
        raise ImportError(
            "WeatherDecomposer.transform_dataset needs xarray, an optional dependency: "
            "pip install 'eo-wm[xarray]'"
        ) from err
    return xarray


class WeatherDecomposer(TransformerMixin, BaseEstimator):
    r"""Decompose forcing ``W_t`` into baseline ``B_t``, anomaly ``A_t`` and stress ``S_t``.

    ``B_t + sigma(d_t) A_t`` reconstructs ``W_t`` exactly (``inverse_transform``).

    Args:
        n_harmonics: ``H`` in the harmonic baseline.
        stress_decays: Memories ``lam`` of the stress integrators.
        stress_vars: ``{stress name: [variable names]}``; a leading ``-`` flips the sign
            (``"-precip"``: a precipitation deficit is damaging). Names refer to
            ``variables`` given to :meth:`fit`. Stresses whose variables are absent are skipped.
        threshold: ``tau`` of the stress integrators (in anomaly units).
        group_key: A label for the grouping (e.g. ``"location"``); when set, ``groups`` must be
            passed to ``fit`` and ``transform`` and one climatology is fitted per group.

    Example:
        >>> import numpy as np
        >>> doy = np.tile(np.arange(1, 366, 5), 3)
        >>> W = np.stack([10 + 8 * np.sin(2 * np.pi * doy / 365), np.ones_like(doy)], 1)
        >>> dec = WeatherDecomposer().fit(W, doy, variables=["temp", "precip"])
        >>> parts = dec.transform(W[:20], doy[:20])
        >>> bool(np.allclose(dec.inverse_transform(parts, doy[:20]), W[:20]))
        True
    """

    def __init__(
        self,
        n_harmonics: int = 3,
        stress_decays: Sequence[float] = (0.7, 0.9),
        stress_vars: Mapping[str, Sequence[str]] | None = None,
        threshold: float = 0.0,
        group_key: str | None = None,
    ) -> None:
        self.n_harmonics = n_harmonics
        self.stress_decays = stress_decays
        self.stress_vars = stress_vars
        self.threshold = threshold
        self.group_key = group_key

    # -- fitting -------------------------------------------------------------------------
    def fit(
        self,
        W: ArrayLike,
        doy: ArrayLike,
        groups: ArrayLike | None = None,
        variables: Sequence[str] | None = None,
    ) -> WeatherDecomposer:
        """Least-squares harmonic fit of mean and variance per variable (and group).

        Args:
            W: Forcing ``(N, m)`` (or ``(..., m)``, flattened), training years only; or a
                pandas DataFrame (columns = variables) or an xarray Dataset (data variables of
                shape ``doy.shape``), whose names are kept.
            doy: Day of year ``(N,)`` in [1, 366].
            groups: Group id per row when ``group_key`` is set.
            variables: Names of the ``m`` columns (default: the DataFrame's columns or the
                Dataset's data variables, else ``var0..``; ``temp`` and ``precip`` drive the
                default stresses). With a DataFrame or Dataset, the variables taken, by name.

        Returns:
            self.

        Raises:
            ValueError: On NaN or infinite forcing, shape mismatch, day of year outside
                [1, 366], too few rows for the harmonic fit, or a DataFrame / Dataset that
                lacks a variable of ``variables`` (named in the message).
        """
        if not isinstance(self.n_harmonics, int) or self.n_harmonics < 0:
            raise ValueError(f"n_harmonics must be a non-negative int, got {self.n_harmonics}")
        W, found = _named_array(W, variables)  # a DataFrame / Dataset names its variables
        variables = found if found is not None else variables
        W2, d = self._flat(W, doy)
        m = W2.shape[1]
        names = list(variables) if variables is not None else [f"var{i}" for i in range(m)]
        if len(names) != m:
            raise ValueError(f"variables has {len(names)} names but W has {m} columns")
        self.variables_ = names
        self.n_features_in_ = m
        g = self._groups(groups, W2.shape[0], fitting=True)
        self.coef_: dict[Hashable, tuple[np.ndarray, np.ndarray]] = {}
        for key in np.unique(g) if g is not None else [None]:
            rows = slice(None) if key is None else g == key
            self.coef_[_key(key)] = self._fit_one(W2[rows], d[rows])
        self.stress_index_ = self._stress_index(names)
        return self

    def _fit_one(self, W: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X = harmonic_design(d, self.n_harmonics)
        if X.shape[0] < X.shape[1]:
            raise ValueError(f"need at least {X.shape[1]} rows to fit, got {X.shape[0]}")
        mean_coef = np.linalg.lstsq(X, W, rcond=None)[0]
        resid2 = (W - X @ mean_coef) ** 2
        var_coef = np.linalg.lstsq(X, resid2, rcond=None)[0]
        return mean_coef, var_coef

    def _stress_index(self, names: list[str]) -> list[tuple[str, list[tuple[int, float]]]]:
        spec = (
            self.stress_vars
            if self.stress_vars is not None
            else {
                "heat": ["temp"],
                "dry": ["-precip"],
            }
        )
        out = []
        for stress, cols in spec.items():
            idx = []
            for c in cols:
                sign, base = (-1.0, c[1:]) if c.startswith("-") else (1.0, c)
                if base in names:
                    idx.append((names.index(base), sign))
            if idx:
                out.append((stress, idx))
        return out

    # -- transforming --------------------------------------------------------------------
    def transform(
        self, W: ArrayLike, doy: ArrayLike, groups: ArrayLike | None = None
    ) -> dict[str, np.ndarray]:
        """Return ``dict(baseline, anomaly, stress, sigma)`` for ``W (..., T, m)``.

        ``doy`` has the shape of ``W`` without the last axis; ``groups`` one id per leading
        index (per window). Stress integrates along the time axis ``T`` from its first step.
        A DataFrame or Dataset is read by the variable names of the fit, in the fit's order.

        Raises:
            NotFittedError: Before :meth:`fit`.
            KeyError: For a group id unseen at fit time.
            ValueError: On NaN forcing, shape mismatch, day of year outside [1, 366], or a
                DataFrame / Dataset lacking a fitted variable (named in the message).
        """
        self._check_fitted()
        W = np.asarray(_named_array(W, self.variables_)[0], dtype=np.float64)
        if not np.isfinite(W).all():
            bad = int((~np.isfinite(W)).sum())
            raise ValueError(f"W has {bad} NaN or infinite value(s): fill or drop them first")
        B, sig = self.climatology(doy, groups, shape=W.shape)
        A = (W - B) / sig
        return {"baseline": B, "anomaly": A, "stress": self.stress(A), "sigma": sig}

    def climatology(
        self, doy: ArrayLike, groups: ArrayLike | None = None, shape: tuple[int, ...] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Baseline ``B(d)`` and ``sigma(d)``, each of shape ``doy.shape + (m,)``."""
        self._check_fitted()
        d = check_doy(doy)
        m = self.n_features_in_
        if shape is not None and (tuple(shape[:-1]) != d.shape or shape[-1] != m):
            raise ValueError(
                f"W has shape {tuple(shape)} but doy has shape {d.shape} and the fit had {m} "
                "variables; W must be doy.shape + (m,)"
            )
        X = harmonic_design(d, self.n_harmonics)
        g = self._groups(groups, d.shape[0] if d.ndim else 1, fitting=False)
        B = np.empty((*d.shape, m))
        var = np.empty((*d.shape, m))
        keys = [None] * (d.shape[0] if d.ndim else 1) if g is None else list(g)
        if g is None:
            mc, vc = self.coef_[None]
            B[...], var[...] = X @ mc, X @ vc
        else:
            for i, key in enumerate(keys):
                k = _key(key)
                if k not in self.coef_:
                    raise KeyError(f"group {key!r} was not seen at fit time")
                mc, vc = self.coef_[k]
                B[i], var[i] = X[i] @ mc, X[i] @ vc
        return B, np.sqrt(np.maximum(var, _MIN_VAR))

    def stress(self, anomaly: ArrayLike) -> np.ndarray:
        """Cumulative stress ``(..., T, n_stress * len(stress_decays))`` from anomalies."""
        A = np.asarray(anomaly, dtype=np.float64)
        if not self.stress_index_:
            return np.zeros((*A.shape[:-1], 0))
        drives = [sum(s * A[..., j] for j, s in idx) / len(idx) for _, idx in self.stress_index_]
        return cumulative_stress(np.stack(drives, -1), self.stress_decays, self.threshold)

    def inverse_transform(
        self, parts: Mapping[str, np.ndarray], doy: ArrayLike, groups: ArrayLike | None = None
    ) -> np.ndarray:
        """Reconstruct ``W = B + sigma(d) A`` from :meth:`transform`'s output."""
        A = np.asarray(parts["anomaly"], dtype=np.float64)
        B, sig = self.climatology(doy, groups, shape=A.shape)
        return B + sig * A

    def transform_dataset(
        self, ds: Any, doy: ArrayLike | None = None, groups: ArrayLike | None = None
    ) -> Any:
        """:meth:`transform` of an xarray Dataset, returned as a Dataset (needs ``eo-wm[xarray]``).

        ``ds`` holds the fitted variables as data variables of one shape (e.g. ``("window",
        "time")``, time last); ``doy`` defaults to the day of year of a datetime ``time``
        coordinate. The result has ``baseline``, ``anomaly``, ``sigma`` over ``ds``'s dims +
        ``variable`` (the fitted names) and ``stress`` over ``ds``'s dims + ``stress_channel``
        (``"<stress>_lam<decay>"``), with ``ds``'s coordinates on those dims.

        Raises:
            ImportError: When xarray is not installed (names the extra).
            TypeError: When ``ds`` is not an xarray Dataset.
            ValueError: As :meth:`transform`; or when ``doy`` is None and ``ds`` has no
                datetime ``time`` coordinate.
        """
        xr = _require_xarray()
        if not isinstance(ds, xr.Dataset):
            raise TypeError(f"ds must be an xarray.Dataset, got {type(ds).__name__}")
        self._check_fitted()
        names = list(self.variables_)
        W, _ = _named_array(ds, names, arg="ds")
        dims = ds[names[0]].dims
        if doy is None:
            time = ds.coords.get("time")
            if time is None or not np.issubdtype(time.dtype, np.datetime64):
                raise ValueError("doy is None but ds has no datetime 'time' coordinate")
            doy = xr.broadcast(time.dt.dayofyear, ds[names[0]])[0].transpose(*dims).values
        parts = self.transform(W, doy, groups)
        coords = {k: c for k, c in ds.coords.items() if set(c.dims) <= set(dims)}
        per_var = (*dims, "variable")
        return xr.Dataset(
            {
                "baseline": (per_var, parts["baseline"]),
                "anomaly": (per_var, parts["anomaly"]),
                "sigma": (per_var, parts["sigma"]),
                "stress": ((*dims, "stress_channel"), parts["stress"]),
            },
            coords={**coords, "variable": names, "stress_channel": self.stress_names},
        )

    @property
    def stress_names(self) -> list[str]:
        """``"<stress>_lam<decay>"`` per stress channel, in :meth:`stress`'s order."""
        return [f"{n}_lam{lam:g}" for n, _ in self.stress_index_ for lam in self.stress_decays]

    @property
    def n_stress(self) -> int:
        """Number of stress channels ``transform`` returns."""
        return len(self.stress_index_) * len(self.stress_decays)

    # -- helpers -------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise NotFittedError("WeatherDecomposer is not fitted yet: call fit(W, doy) first")

    def _flat(self, W: ArrayLike, doy: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        W = np.asarray(W, dtype=np.float64)
        d = check_doy(doy)
        if W.ndim < 2 or W.shape[:-1] != d.shape:
            raise ValueError(f"W must be doy.shape + (m,), got W {W.shape} and doy {d.shape}")
        if W.size == 0:
            raise ValueError(f"W is empty (shape {W.shape}): nothing to fit")
        if not np.isfinite(W).all():
            bad = int((~np.isfinite(W)).sum())
            raise ValueError(f"W has {bad} NaN or infinite value(s): fill or drop them first")
        return W.reshape(-1, W.shape[-1]), d.reshape(-1)

    def _groups(self, groups: ArrayLike | None, n: int, fitting: bool) -> np.ndarray | None:
        if self.group_key is None:
            if groups is not None:
                raise ValueError("groups given but group_key is None")
            return None
        if groups is None:
            raise ValueError(f"group_key={self.group_key!r} needs groups")
        g = np.asarray(groups)
        if fitting:
            g = g.reshape(-1)
        if g.shape[0] != n:
            raise ValueError(f"groups has {g.shape[0]} entries, expected {n}")
        return g


def _key(k: Hashable) -> Hashable:
    return k.item() if isinstance(k, np.generic) else k
