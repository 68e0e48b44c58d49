"""The Explanation returned by the explainer: a ``shap.Explanation`` when shap is installed.

shap's plots check ``isinstance(x, shap.Explanation)``, so with shap importable
:class:`Explanation` subclasses it and ``shap.plots.bar/beeswarm/waterfall/scatter`` accept it
directly. Without shap it is a small numpy-only class with the same attributes
(``values``, ``base_values``, ``data``, ``feature_names``, ``output_names``), slicing,
``.abs``, ``.mean(axis)``, ``len`` and ``.shape``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

_SHAP_HINT = "this needs shap: pip install 'esensc[shap]'"


class NumpyExplanation:
    """Numpy-only stand-in for ``shap.Explanation`` (used when shap is not installed)."""

    def __init__(
        self,
        values: Any,
        base_values: Any = None,
        data: Any = None,
        feature_names: Sequence[str] | str | None = None,
        output_names: Sequence[str] | str | None = None,
        **_ignored: Any,
    ) -> None:
        self.values: NDArray[np.float64] = np.asarray(values)
        self.base_values: Any = None if base_values is None else np.asarray(base_values)
        self.data: Any = None if data is None else np.asarray(data)
        self.feature_names: Any = feature_names
        self.output_names: Any = output_names

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of ``values``."""
        return tuple(self.values.shape)

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def __repr__(self) -> str:
        return f".values =\n{self.values!r}\n\n.base_values =\n{self.base_values!r}"

    def _axes(self, item: Any) -> list[Any]:
        key = list(item) if isinstance(item, tuple) else [item]
        if sum(k is Ellipsis for k in key) > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if Ellipsis in key:
            pos = next(i for i, k in enumerate(key) if k is Ellipsis)
            fill = [slice(None)] * (self.values.ndim - len(key) + 1)
            key = key[:pos] + fill + key[pos + 1 :]
        if len(key) > self.values.ndim:
            raise IndexError(f"too many indices for an explanation of shape {self.shape}")
        return key + [slice(None)] * (self.values.ndim - len(key))

    def __getitem__(self, item: Any) -> NumpyExplanation:
        key = self._axes(item)
        values = self.values[tuple(key)]
        # axes of values: (row, feature[, output]) once explained rows exist
        feat_ax = 1 if self.values.ndim >= 2 else 0
        out_ax = 2 if self.values.ndim == 3 else None
        base = self.base_values
        if base is not None:
            bkey = [key[0]] if self.values.ndim >= 2 else []
            if out_ax is not None:
                bkey.append(key[out_ax])
            base = base[tuple(bkey)] if bkey else base
        data = self.data
        if data is not None:
            data = data[tuple(key[: feat_ax + 1])]
        names = self.feature_names
        if names is not None and not isinstance(names, str):
            picked = np.asarray(names, dtype=object)[key[feat_ax]]
            names = picked.tolist() if isinstance(picked, np.ndarray) else picked
        outs = self.output_names
        if outs is not None and out_ax is not None and not isinstance(outs, str):
            picked = np.asarray(outs, dtype=object)[key[out_ax]]
            outs = picked.tolist() if isinstance(picked, np.ndarray) else picked
        return type(self)(values, base, data, names, outs)

    @property
    def abs(self) -> NumpyExplanation:
        """Element-wise absolute value of ``values``."""
        return type(self)(
            np.abs(self.values), self.base_values, self.data, self.feature_names,
            self.output_names,
        )  # fmt: skip

    def mean(self, axis: int) -> NumpyExplanation:
        """Mean of ``values`` (and ``data``/``base_values`` over rows) along ``axis``."""
        values = self.values.mean(axis)
        if axis == 0:
            base = None if self.base_values is None else self.base_values.mean(0)
            data = None if self.data is None else self.data.mean(0)
            return type(self)(values, base, data, self.feature_names, self.output_names)
        return type(self)(values, self.base_values, self.data, None, self.output_names)


class _ESENSCExplanationMixin:
    """Attributions of explained rows; a ``shap.Explanation`` subclass when shap is installed.

    The class is built on first use (importing shap takes seconds, so ``import esensc`` does
    not pay for it): ``esensc.Explanation`` subclasses ``shap.Explanation`` if shap can be
    imported, else a small numpy-only class with the same attributes.

    Attributes:
        values: Attributions, (rows, n) or (rows, n, k).
        base_values: ``v(∅)`` per row, (rows,) or (rows, k).
        data: The explained rows, (rows, n).
        feature_names: Feature names or ``None``.
        output_names: Output names or ``None``.

    Example:
        >>> import numpy as np
        >>> from esensc import Explanation
        >>> e = Explanation(np.ones((2, 3)), base_values=np.zeros(2), data=np.zeros((2, 3)))
        >>> e[0].values.tolist()
        [1.0, 1.0, 1.0]
    """

    def plot(self, kind: str = "bar", **kwargs: Any) -> Any:
        """Draw the explanation with ``shap.plots.<kind>`` (bar, beeswarm, waterfall, ...).

        Args:
            kind: Name of a function in ``shap.plots``.
            **kwargs: Passed to that function (e.g. ``show=False``).

        Raises:
            ImportError: If shap is not installed (names the ``esensc[shap]`` extra).
            ValueError: If ``shap.plots`` has no plot called ``kind``.
        """
        shap = _import_shap()
        if shap is None:
            raise ImportError(_SHAP_HINT)
        fn = getattr(shap.plots, kind, None) if isinstance(kind, str) else None
        if fn is None or kind.startswith("_"):
            raise ValueError(f"shap.plots has no plot called {kind!r}")
        return fn(self, **kwargs)

    def to_shap(self) -> Any:
        """Return a plain ``shap.Explanation`` with the same content.

        Raises:
            ImportError: If shap is not installed (names the ``esensc[shap]`` extra).
        """
        shap = _import_shap()
        if shap is None:
            raise ImportError(_SHAP_HINT)
        values: Any = self.values  # type: ignore[attr-defined]
        base: Any = self.base_values  # type: ignore[attr-defined]
        data: Any = self.data  # type: ignore[attr-defined]
        return shap.Explanation(
            values=np.asarray(values),
            base_values=None if base is None else np.asarray(base),
            data=None if data is None else np.asarray(data),
            feature_names=self.feature_names,  # type: ignore[attr-defined]
            output_names=self.output_names,  # type: ignore[attr-defined]
        )


def _import_shap() -> Any:
    try:  # optional dependency: esensc[shap]
        import shap
    except ImportError:
        return None
    return shap


_CLASS: type | None = None


def explanation_class() -> type:
    """Return ``esensc.Explanation``, building it on first use (imports shap if available)."""
    global _CLASS
    if _CLASS is None:
        shap = _import_shap()
        base: type = shap.Explanation if shap is not None else NumpyExplanation
        _CLASS = type(
            "Explanation",
            (_ESENSCExplanationMixin, base),
            {"__module__": "esensc", "__doc__": _ESENSCExplanationMixin.__doc__},
        )
    return _CLASS


def __getattr__(name: str) -> Any:
    if name == "Explanation":
        return explanation_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
