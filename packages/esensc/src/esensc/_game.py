"""Coalition evaluation: build masked batches, call the model, average over the background.

For explained rows ``X`` (rows, n), background ``b`` (B, n) with weights ``w`` and coalitions
``c = 0..C-1``, :func:`coalition_values` returns ``Σ_j w_j f(x_S, b_{j,~S})`` (before the link)
for every (row, coalition) pair ``q = r·C + c``, using ``rows·C·B`` model rows fed to the model
in chunks of at most ``batch_size`` rows. A builder makes the masked rows of a range of pairs
as a (pairs, B, n) block: :func:`leave_one_out_builder` for ESENSC's coalitions (one reused
buffer: two column writes per coalition once a slot holds its base), :func:`mask_builder` for
any boolean masks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from methodkit import progress as show_progress

LINKS = ("identity", "logit")
DEFAULT_MAX_ELEMENTS = 1 << 20  # model-input elements per block (8 MiB of float64: stays in cache)

ModelFn = Callable[[Any], Any]
Builder = Callable[[int, int], NDArray[np.float64]]


def leave_one_out_builder(X: NDArray[np.float64], bg: NDArray[np.float64]) -> Builder:
    """Masked rows of ESENSC's coalitions for (row, coalition) pairs ``q0 <= q < q1``.

    Coalition ``c = i`` is ``{i}``, ``c = n + i`` is ``N minus {i}``, ``c = 2n`` is ``N``
    (``C = 2n + 1`` per row, pair ``q = r·C + c``). The B masked rows of ``{i}`` are the
    background with column i set to ``x_i``; those of ``N minus {i}`` are ``x`` repeated with
    column i taken from the background.

    The block returned is a read-only view of one buffer that the next call rewrites: each
    slot of the buffer remembers its base (the background, or row ``x_r`` repeated) and the one
    column it changed, so a slot that keeps its base costs two column writes (restore, then
    write) instead of a (B, n) copy. Consecutive blocks of large n keep their bases (runs of
    ``{i}`` and ``N minus {i}`` are n long), which takes the O(B·n) copy per coalition out of
    the cost beyond the model. The model gets the view read-only, so a model that writes into
    its input fails loudly instead of corrupting later blocks.
    """
    return _LeaveOneOutBlocks(X, bg)


_NO_BASE, _BG_BASE = -2, -1  # slot contents that are no row index of X


class _LeaveOneOutBlocks:
    """The stateful builder behind :func:`leave_one_out_builder` (one buffer, reused)."""

    def __init__(self, X: NDArray[np.float64], bg: NDArray[np.float64]) -> None:
        self.X, self.bg, self.bg_t = X, bg, np.ascontiguousarray(bg.T)
        self.n, self.B = X.shape[1], bg.shape[0]
        self.Z: NDArray[np.float64] = np.empty((0, self.B, self.n))
        self.base: NDArray[np.int64] = np.empty(0, dtype=np.int64)  # per slot: _BG_BASE or r
        self.col: NDArray[np.int64] = np.empty(0, dtype=np.int64)  # column changed, or -1

    def _grow(self, k: int) -> None:
        if k > len(self.Z):
            self.Z = np.empty((k, self.B, self.n))
            self.base = np.full(k, _NO_BASE, dtype=np.int64)
            self.col = np.full(k, -1, dtype=np.int64)

    def __call__(self, q0: int, q1: int) -> NDArray[np.float64]:
        self._grow(q1 - q0)
        n, Z, X, bg_t = self.n, self.Z, self.X, self.bg_t
        Z.flags.writeable = True
        slot = np.arange(q1 - q0)
        r, c = np.divmod(np.arange(q0, q1), 2 * n + 1)
        single = c < n
        need = np.where(single, _BG_BASE, r)
        base, col = self.base[slot], self.col[slot]
        keep = base == need
        # slots that keep their base: restore the column the last block changed
        fix = keep & (col >= 0)
        on_bg = fix & (base == _BG_BASE)
        on_x = fix & (base >= 0)
        Z[slot[on_bg], :, col[on_bg]] = bg_t[col[on_bg]]
        Z[slot[on_x], :, col[on_x]] = X[base[on_x], col[on_x]][:, None]
        # slots whose base changes: a full copy of the background or of x_r
        Z[slot[~keep & single]] = self.bg
        refill = slot[~keep & ~single]
        Z[refill] = X[r[refill]][:, None, :]
        # the coalition's own column: x_i into the background, or b_i into x
        Z[slot[single], :, c[single]] = X[r[single], c[single]][:, None]
        loo = ~single & (c < 2 * n)
        Z[slot[loo], :, c[loo] - n] = bg_t[c[loo] - n]
        self.base[slot] = need
        self.col[slot] = np.where(single, c, np.where(loo, c - n, -1))
        Z.flags.writeable = False
        return Z[: q1 - q0]


def mask_builder(
    X: NDArray[np.float64], bg: NDArray[np.float64], masks: NDArray[np.bool_]
) -> Builder:
    """Masked rows ``where(masks[c], X[r], bg[j])`` for any boolean coalitions (C, n)."""
    C = masks.shape[0]

    def build(q0: int, q1: int) -> NDArray[np.float64]:
        q = np.arange(q0, q1)
        r, c = q // C, q % C
        return np.where(masks[c][:, None, :], X[r][:, None, :], bg[None, :, :])

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
    batch_size: int | None = None,
) -> tuple[NDArray[np.float64], bool]:
    """``Σ_j w_j f(b_j)`` (before the link), shape (k,), and whether the model output is 1-D.

    This is the empty coalition: B model rows, shared by every explained row, in calls of at
    most ``batch_size`` rows.
    """
    step = len(bg) if batch_size is None else batch_size
    what = "empty coalition (background rows)"
    parts = [call_model(f, bg[s : s + step], columns, what, False) for s in range(0, len(bg), step)]
    y = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return w @ y.reshape(y.shape[0], -1), y.ndim == 1


def coalition_values(
    f: ModelFn,
    build: Builder,
    n_pairs: int,
    bg: NDArray[np.float64],
    w: NDArray[np.float64],
    describe: Callable[[int], str],
    columns: Sequence[str] | None = None,
    batch_size: int | None = None,
    progress: bool | None = None,
) -> NDArray[np.float64]:
    """Background-averaged model outputs of every (row, coalition) pair: shape (pairs, k).

    Args:
        f: The model callable.
        build: ``build(q0, q1)`` -> the masked rows of pairs ``q0..q1-1``, shape (q1-q0, B, n).
        n_pairs: Number of (row, coalition) pairs.
        bg: Background rows (B, n).
        w: Background weights (B,), summing to one.
        describe: Maps a pair index to a description for error messages.
        columns: Column names to pass a DataFrame to the model, or None for arrays.
        batch_size: Maximum model rows per call (None: about 4M input elements per call).
        progress: A bar over the blocks of model calls: ``None`` on a terminal only,
            ``True`` always, ``False`` never.

    Returns:
        ``Σ_j w_j f(x_S, b_{j,~S})`` before the link, shape (pairs, k).
    """
    B, n = bg.shape
    if batch_size is None:
        batch_size = max(B, DEFAULT_MAX_ELEMENTS // max(n, 1))
    per_block = max(1, batch_size // B)  # pairs per block; a block is split if B > batch_size
    acc: NDArray[np.float64] | None = None
    blocks = range(0, n_pairs, per_block)
    for q0 in show_progress(blocks, enabled=progress, desc="coalitions", total=len(blocks)):
        q1 = min(q0 + per_block, n_pairs)
        Z = build(q0, q1).reshape(-1, n)
        parts = [
            call_model(f, Z[s : s + batch_size], columns, None)
            for s in range(0, len(Z), batch_size)
        ]
        y = parts[0] if len(parts) == 1 else np.concatenate(parts)
        finite = np.all(np.isfinite(y), axis=1)
        if not np.all(finite):
            raise ValueError(
                f"model returned NaN or inf on the {describe(q0 + int(np.argmin(finite)) // B)}"
            )
        if acc is None:
            acc = np.empty((n_pairs, y.shape[1]))
        elif y.shape[1] != acc.shape[1]:
            raise ValueError(f"model returned {y.shape[1]} outputs per row, earlier {acc.shape[1]}")
        acc[q0:q1] = w @ y.reshape(q1 - q0, B, -1)  # weighted mean over the background
    if acc is None:
        raise ValueError(f"nothing to evaluate: {n_pairs} (row, coalition) pairs")
    return acc
