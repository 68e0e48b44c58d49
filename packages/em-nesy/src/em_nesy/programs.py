"""Symbolic programs: the constraint ``c(z, y)`` relating latent symbols ``z`` to a label ``y``.

A program only has to *evaluate* integer assignments; nothing here is ever differentiated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from em_nesy.factors import FactorGraph


@runtime_checkable
class SymbolicProgram(Protocol):
    """What every engine needs from a program.

    Attributes:
        domains: Number of values of each latent symbol ``z_i`` (variable order of the logits).
    """

    domains: tuple[int, ...]

    def split_labels(self, y: Any) -> list[Any]:
        """Validate a batch of labels and return one label per example."""
        ...

    def consistent(self, z: NDArray[np.int64], y: Any) -> NDArray[np.bool_]:
        """``c(z, y)`` for z ``(B, S, n)`` (or ``(S, n)`` shared by the batch), as ``(B, S)``."""
        ...

    def distance(self, z: NDArray[np.int64], y: Any) -> NDArray[np.float64]:
        """Non-negative distance between ``f(z)`` and ``y``, 0 iff consistent; ``(B, S)``."""
        ...


def _check_domains(domains: Sequence[int]) -> tuple[int, ...]:
    doms = tuple(int(d) for d in domains)
    if not doms or any(d < 1 for d in doms):
        raise ValueError(f"domains must be a non-empty sequence of positive ints, got {domains!r}")
    return doms


def _equal(output: Any, label: Any) -> bool:
    eq = output == label
    return eq if isinstance(eq, bool) else bool(np.all(np.asarray(eq)))


def _batch_z(z: NDArray[np.int64], batch: int) -> NDArray[np.int64]:
    z = np.asarray(z)
    if z.ndim == 2:
        return np.broadcast_to(z[None], (batch, *z.shape))
    if z.ndim != 3 or z.shape[0] != batch:
        raise ValueError(f"z must have shape (S, n) or ({batch}, S, n), got {z.shape}")
    return z


class FunctionProgram:
    """A black-box program ``y = f(z)`` given as ordinary Python.

    Args:
        f: Maps an assignment to an output comparable with the labels. With
            ``vectorized=False`` it receives one tuple of Python ints; with ``vectorized=True``
            an int64 array ``(S, n)`` and returns ``S`` outputs (array with leading axis ``S``).
        domains: Number of values of each symbol.
        vectorized: See ``f``.
        distance: Optional ``distance(outputs, y) -> (S,)`` array used by ABC sampling
            (default: 0 if the output equals ``y``, else 1).

    Example:
        >>> prog = FunctionProgram(lambda z: (z[0] * z[1]) % 5, domains=(5, 5))
        >>> prog.consistent(np.array([[1, 2], [2, 2]]), [2]).tolist()
        [[True, False]]
    """

    def __init__(
        self,
        f: Callable[[Any], Any],
        domains: Sequence[int],
        vectorized: bool = False,
        distance: Callable[[Any, Any], NDArray[np.float64]] | None = None,
    ) -> None:
        if not callable(f):
            raise TypeError(f"f must be callable, got {type(f).__name__}")
        self.f = f
        self.domains = _check_domains(domains)
        self.vectorized = bool(vectorized)
        self._distance = distance

    def evaluate(self, z: NDArray[np.int64]) -> list[Any] | NDArray[Any]:
        """Outputs of ``f`` for each row of ``z`` (``(S, n)``)."""
        z = np.asarray(z, dtype=np.int64)
        if self.vectorized:
            return np.asarray(self.f(z))
        return [self.f(tuple(row)) for row in z.tolist()]  # tolist() yields Python ints

    def split_labels(self, y: Any) -> list[Any]:
        """One label per example (a tensor or array is split along its first axis)."""
        if hasattr(y, "detach"):
            y = y.detach().cpu().numpy()
        if isinstance(y, np.ndarray):
            return [v.item() if v.ndim == 0 else v for v in y]
        return list(y)

    def _matches(self, outputs: Any, label: Any) -> NDArray[np.bool_]:
        if isinstance(outputs, np.ndarray):
            eq = outputs == np.asarray(label)
            return eq.reshape(eq.shape[0], -1).all(axis=1) if eq.ndim > 1 else eq
        return np.fromiter((_equal(o, label) for o in outputs), dtype=bool, count=len(outputs))

    def _per_example(self, z: NDArray[np.int64], y: Any, fn: Callable[..., Any]) -> NDArray[Any]:
        labels = self.split_labels(y)
        zb = np.asarray(z, dtype=np.int64)
        if zb.ndim == 2:  # shared assignments: evaluate once
            out = self.evaluate(zb)
            return np.stack([fn(out, lab) for lab in labels])
        zb = _batch_z(zb, len(labels))
        return np.stack([fn(self.evaluate(zb[b]), lab) for b, lab in enumerate(labels)])

    def consistent(self, z: NDArray[np.int64], y: Any) -> NDArray[np.bool_]:
        """``f(z) == y`` for each example and assignment, shape ``(B, S)``."""
        return self._per_example(z, y, self._matches)

    def distance(self, z: NDArray[np.int64], y: Any) -> NDArray[np.float64]:
        """User distance if given, else 0/1 mismatch; shape ``(B, S)``."""
        if self._distance is None:
            return self._per_example(z, y, lambda o, lab: (~self._matches(o, lab)).astype(float))
        dist = self._distance
        return self._per_example(z, y, lambda o, lab: np.asarray(dist(o, lab), dtype=np.float64))


class MultiDigitAddition:
    """Sum of two N-digit numbers from 2N digit symbols.

    Variables are ordered ``a_0..a_{N-1}, b_0..b_{N-1}`` (digit ``i`` has weight ``10**i``);
    the label is the ``N + 1`` decimal digits of ``a + b``, most significant first.

    Args:
        n_digits: Number of digits ``N`` of each operand (>= 1).

    Example:
        >>> prog = MultiDigitAddition(2)
        >>> prog.sum_digits(np.array([[3, 1, 9, 2]])).tolist()  # 13 + 29
        [[0, 4, 2]]
    """

    def __init__(self, n_digits: int) -> None:
        if isinstance(n_digits, bool) or not isinstance(n_digits, int | np.integer):
            raise TypeError(f"n_digits must be an int, got {type(n_digits).__name__}")
        if n_digits < 1:
            raise ValueError(f"n_digits must be >= 1, got {n_digits}")
        self.n_digits = int(n_digits)
        self.domains = (10,) * (2 * self.n_digits)

    def sum_digits(self, z: NDArray[np.int64]) -> NDArray[np.int64]:
        """Digits of ``a + b`` (MSB first, ``N + 1`` of them) for assignments ``(..., 2N)``."""
        z = np.asarray(z, dtype=np.int64)
        n = self.n_digits
        if z.shape[-1] != 2 * n:
            raise ValueError(f"assignments need {2 * n} symbols, got shape {z.shape}")
        a, b = z[..., :n], z[..., n:]
        out = np.empty((*z.shape[:-1], n + 1), dtype=np.int64)
        carry = np.zeros(z.shape[:-1], dtype=np.int64)
        for i in range(n):
            t = a[..., i] + b[..., i] + carry
            out[..., n - i] = t % 10
            carry = t // 10
        out[..., 0] = carry
        return out

    def f(self, z: NDArray[np.int64]) -> NDArray[np.int64]:
        """Vectorised ``f``: alias of :meth:`sum_digits` (for samplers)."""
        return self.sum_digits(z)

    def split_labels(self, y: Any) -> NDArray[np.int64]:
        """Return labels as an int64 array ``(B, N + 1)``.

        Raises:
            ValueError: If ``y`` is not 2-D with ``N + 1`` columns.
        """
        if hasattr(y, "detach"):
            y = y.detach().cpu().numpy()
        arr = np.asarray(y)
        if arr.ndim != 2 or arr.shape[1] != self.n_digits + 1:
            raise ValueError(
                f"y must have shape (B, {self.n_digits + 1}) (sum digits, MSB first) for "
                f"n_digits={self.n_digits}, got {arr.shape}"
            )
        if not np.issubdtype(arr.dtype, np.integer) and (
            not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr))
        ):
            raise ValueError("y must hold integer digits")
        return arr.astype(np.int64)

    def label_possible(self, y: Any) -> NDArray[np.bool_]:
        """Rows whose digits are in 0..9 and whose sum two N-digit numbers can produce."""
        arr = self.split_labels(y)
        ok = np.all((arr >= 0) & (arr <= 9), axis=1) & (arr[:, 0] <= 1)
        # the largest sum is 2 * (10**N - 1) = 1 9...9 8
        top = np.array([1] + [9] * (self.n_digits - 1) + [8])
        diff = arr - top  # lexicographic arr <= top: the first differing digit is smaller
        first = np.argmax(diff != 0, axis=1)
        lex_ok = (diff[np.arange(arr.shape[0]), first] <= 0) | np.all(diff == 0, axis=1)
        return ok & lex_ok

    def consistent(self, z: NDArray[np.int64], y: Any) -> NDArray[np.bool_]:
        """``sum_digits(z) == y`` per example and assignment, shape ``(B, S)``."""
        arr = self.split_labels(y)
        z = np.asarray(z)
        s = self.sum_digits(z) if z.ndim == 2 else self.sum_digits(_batch_z(z, arr.shape[0]))
        if s.ndim == 2:  # shared assignments: compare each label against all of them
            return np.stack([np.all(s == row, axis=-1) for row in arr])
        return np.all(s == arr[:, None, :], axis=-1)

    def distance(self, z: NDArray[np.int64], y: Any) -> NDArray[np.float64]:
        """Digit-wise Hamming distance between ``sum_digits(z)`` and ``y``, shape ``(B, S)``."""
        arr = self.split_labels(y)
        s = self.sum_digits(_batch_z(np.asarray(z), arr.shape[0]))
        return np.sum(s != arr[:, None, :], axis=-1).astype(np.float64)

    def to_factor_graph(self, y: Any, dtype: Any = None) -> FactorGraph:
        """Carry-chain factor graph for labels ``y`` (a tree, so BP on it is exact).

        Variables ``0..2N-1`` are the digits (program order); ``2N..3N`` are the carries
        ``c_0..c_N``. Factor ``i`` links ``(a_i, b_i, c_i, c_{i+1})`` with the indicator
        ``a_i + b_i + c_i == s_i + 10 c_{i+1}``; unary factors clamp ``c_0 = 0`` and
        ``c_N = s_N``. Impossible labels get an all-zero table (the example becomes invalid).
        """
        import torch

        from em_nesy._tables import addition_indicator
        from em_nesy.factors import FactorGraph

        dtype = dtype or torch.get_default_dtype()
        arr = self.split_labels(y)
        n = self.n_digits
        s = np.clip(arr[:, ::-1], 0, 9)  # LSB first, s[:, n] = final carry
        possible = torch.as_tensor(self.label_possible(arr))
        table = addition_indicator().to(dtype)  # (10 s, 2 c, 2 c', 10 a, 10 b)
        graph = FactorGraph([10] * (2 * n) + [2] * (n + 1))
        for i in range(n):
            t = table[torch.as_tensor(s[:, i].copy())].permute(0, 3, 4, 1, 2)  # (B, a, b, c, c')
            graph.add_factor((i, n + i, 2 * n + i, 2 * n + i + 1), t)
        start = torch.tensor([1.0, 0.0], dtype=dtype).expand(arr.shape[0], 2)
        graph.add_factor((2 * n,), start)
        last = torch.as_tensor(s[:, n].copy())
        end = torch.nn.functional.one_hot(last.clamp(0, 1), 2).to(dtype)
        end = end * ((last <= 1) & possible).to(dtype)[:, None]
        graph.add_factor((3 * n,), end)
        return graph
