"""Coalition evaluation: build masked batches, call the model, average over the background.

For explained rows ``X`` (rows, n), background ``b`` (B, n) with weights ``w`` and boolean
coalition masks ``M`` (C, n), :func:`coalition_values` returns
``v[r, c, k] = g(Σ_j w_j f(where(M[c], X[r], b[j]))[k])`` using ``rows * C * B`` model rows,
fed to the model in chunks of at most ``batch_size`` rows.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

LINKS = ("identity", "logit")
DEFAULT_MAX_ELEMENTS = 1 << 22  # model-input elements per chunk (32 MiB of float64)

ModelFn = Callable[[Any], Any]
Builder = Callable[[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]], NDArray[np.float64]]


def leave_one_out_builder(X: NDArray[np.float64], bg: NDArray[np.float64]) -> Builder:
    """Fast masked-input constructor for the coalitions ESENSC evaluates.

    Coalition index ``c = i`` is ``{i}``, ``c = n + i`` is ``N minus {i}``, ``c = 2n`` is ``N``.
    Each masked row differs from ``X[r]`` or from ``bg[j]`` in one entry only, so it is built
    with one row copy and one scattered entry instead of a full ``where`` over three gathered
    arrays (less memory traffic, which dominates the cost for large n).
    """
    n = X.shape[1]

    def build(r: NDArray[np.intp], c: NDArray[np.intp], j: NDArray[np.intp]) -> NDArray[np.float64]:
        Z = np.empty((len(r), n))
        is_single = c < n
        Z[~is_single] = X[r[~is_single]]
        Z[is_single] = bg[j[is_single]]
        single = np.flatnonzero(is_single)
        if single.size:
            cols = c[single]
            Z[single, cols] = X[r[single], cols]
        minus = np.flatnonzero((c >= n) & (c < 2 * n))
        if minus.size:
            cols = c[minus] - n
            Z[minus, cols] = bg[j[minus], cols]
        return Z

    return build


def leave_one_out_masks(n: int) -> NDArray[np.bool_]:
    """The coalitions ESENSC evaluates: rows 0..n-1 are {i}, n..2n-1 are N minus {i}, 2n is N."""
    eye = np.eye(n, dtype=bool)
    return np.concatenate([eye, ~eye, np.ones((1, n), dtype=bool)])


def validate_link(link: str) -> str:
    """Return ``link`` if known, else raise ValueError."""
    if not isinstance(link, str) or link not in LINKS:
        raise ValueError(f"link must be one of {LINKS}, got {link!r}")
    return link


def apply_link(p: NDArray[np.float64], link: str, what: str) -> NDArray[np.float64]:
    """Apply the link after averaging (shap's ``linearize_link=False`` game)."""
    if link == "identity":
        return p
    if np.any((p <= 0) | (p >= 1)):
        bad = p[(p <= 0) | (p >= 1)].ravel()[0]
        raise ValueError(
            f"link='logit' needs model outputs in (0, 1); the {what} averaged to {bad!r}"
        )
    return np.log(p) - np.log1p(-p)


def _torch_wrapper(module: Any) -> ModelFn:
    import torch

    try:
        param = next(module.parameters())
        device, dtype = param.device, param.dtype
    except StopIteration:
        device, dtype = torch.device("cpu"), torch.get_default_dtype()

    def f(Z: Any) -> NDArray[np.float64]:
        with torch.no_grad():
            out = module(torch.as_tensor(np.asarray(Z), dtype=dtype, device=device))
        return out.detach().cpu().double().numpy()

    return f


def as_model_fn(model: Any) -> ModelFn:
    """Turn ``model`` into a callable ``f(Z) -> array``.

    torch ``nn.Module`` -> no-grad numpy wrapper on the module's device and dtype; a
    non-callable estimator with ``predict_proba`` and classifier type -> ``predict_proba``;
    any other non-callable with ``predict`` -> ``predict``; callables are used as they are.

    Raises:
        TypeError: If ``model`` is none of these.
    """
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.nn.Module):
        return _torch_wrapper(model)
    if not callable(model):
        is_clf = getattr(model, "_estimator_type", None) == "classifier"
        if not is_clf:
            tags = getattr(model, "__sklearn_tags__", None)
            try:
                is_clf = tags is not None and tags().estimator_type == "classifier"
            except Exception:
                is_clf = False
        if is_clf and hasattr(model, "predict_proba"):
            return model.predict_proba
        if hasattr(model, "predict"):
            return model.predict
        raise TypeError(
            "model must be a callable mapping an (m, n) array to (m,) or (m, k) outputs, an "
            f"estimator with predict/predict_proba, or a torch nn.Module; got "
            f"{type(model).__name__}"
        )
    return model


def call_model(
    f: ModelFn,
    Z: NDArray[np.float64],
    columns: Sequence[str] | None,
    what: str | None,
    flatten: bool = True,
) -> NDArray[np.float64]:
    """Call ``f`` on ``Z`` and check the output: (m,) or (m, k), finite unless ``what`` is None."""
    if columns is not None:
        import pandas as pd

        arg: Any = pd.DataFrame(Z, columns=list(columns))
    else:
        arg = Z
    out = f(arg)
    if hasattr(out, "detach"):  # a torch tensor from a user callable
        out = out.detach().cpu().numpy()
    y = np.asarray(out, dtype=np.float64)
    if y.ndim == 0 or y.shape[0] != Z.shape[0]:
        raise ValueError(
            f"model returned output of shape {y.shape} for {Z.shape[0]} input rows; the "
            "leading dimension must equal the number of rows"
        )
    if y.ndim > 2:
        raise ValueError(f"model output must be (m,) or (m, k), got shape {y.shape}")
    if what is not None and not np.all(np.isfinite(y)):
        raise ValueError(f"model returned NaN or inf on the {what}")
    return y.reshape(y.shape[0], -1) if flatten else y


def empty_value(
    f: ModelFn,
    bg: NDArray[np.float64],
    w: NDArray[np.float64],
    columns: Sequence[str] | None,
) -> tuple[NDArray[np.float64], bool]:
    """``Σ_j w_j f(b_j)`` (before the link), shape (k,), and whether the model output is 1-D.

    This is the empty coalition: B model rows, shared by every explained row.
    """
    y = call_model(f, bg, columns, "empty coalition (background rows)", flatten=False)
    return w @ y.reshape(y.shape[0], -1), y.ndim == 1


def coalition_values(
    f: ModelFn,
    X: NDArray[np.float64],
    bg: NDArray[np.float64],
    w: NDArray[np.float64],
    masks: NDArray[np.bool_],
    kinds: Callable[[int], str],
    columns: Sequence[str] | None = None,
    batch_size: int | None = None,
    build: Builder | None = None,
) -> NDArray[np.float64]:
    """Background-averaged model outputs for every (row, coalition): shape (rows, C, k).

    Args:
        f: The model callable.
        X: Explained rows (rows, n).
        bg: Background rows (B, n).
        w: Background weights (B,), summing to one.
        masks: Coalitions as booleans (C, n); True = the feature takes the explained value.
        kinds: Maps a coalition index to a description for error messages.
        columns: Column names to pass a DataFrame to the model, or None for arrays.
        batch_size: Maximum model rows per call (None: about 4M input elements per call).
        build: Optional fast constructor ``build(r, c, j) -> Z`` of the masked inputs for row
            indices ``r``, coalition indices ``c`` and background indices ``j``; it must return
            ``where(masks[c], X[r], bg[j])``.

    Returns:
        ``Σ_j w_j f(x_S, b_{j,~S})`` before the link, shape (rows, C, k).
    """
    rows, n = X.shape
    B = bg.shape[0]
    C = masks.shape[0]
    per_row = C * B
    total = rows * per_row
    if batch_size is None:
        batch_size = max(B, DEFAULT_MAX_ELEMENTS // max(n, 1))
    acc: NDArray[np.float64] | None = None
    for start in range(0, total, batch_size):
        idx = np.arange(start, min(start + batch_size, total))
        r = idx // per_row
        c = (idx // B) % C
        j = idx % B
        Z = np.where(masks[c], X[r], bg[j]) if build is None else build(r, c, j)
        y = call_model(f, Z, columns, None)
        finite = np.all(np.isfinite(y), axis=1)
        if not np.all(finite):
            bad = int(np.flatnonzero(~finite)[0])
            raise ValueError(
                f"model returned NaN or inf on the {kinds(int(c[bad]))} of explained row "
                f"{int(r[bad])}"
            )
        if acc is None:
            acc = np.zeros((rows * C, y.shape[1]))
        elif y.shape[1] != acc.shape[1]:
            raise ValueError(f"model returned {y.shape[1]} outputs per row, earlier {acc.shape[1]}")
        flat = idx // B  # r * C + c
        wy = y * w[j][:, None]
        for k in range(y.shape[1]):
            acc[:, k] += np.bincount(flat, weights=wy[:, k], minlength=rows * C)
    if acc is None:
        raise ValueError(f"nothing to evaluate: X has shape {X.shape}, {C} coalitions")
    return acc.reshape(rows, C, -1)
