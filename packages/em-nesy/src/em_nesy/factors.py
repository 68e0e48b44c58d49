"""Batched discrete factor graphs: one structure shared by a batch, one table per example."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from em_nesy._base import NEG


@dataclass(frozen=True)
class Factor:
    """A factor over ``variables`` with log-potentials ``log_table`` of shape ``(B, *dims)``.

    Attributes:
        variables: Indices of the variables the factor touches, in table-axis order.
        log_table: Log-potentials; impossible combinations hold a very negative finite value.
    """

    variables: tuple[int, ...]
    log_table: torch.Tensor


class FactorGraph:
    """Variables with finite domains and factors over them, batched along a leading axis.

    Args:
        domains: Domain size of every variable. Engines put the neural symbols first
            (variables ``0..n-1`` in the program's order); further variables are latent.

    Example:
        >>> g = FactorGraph([2, 2])
        >>> g.add_factor((0, 1), torch.tensor([[1.0, 0.0], [0.0, 1.0]]))  # x0 == x1
        >>> len(g.factors)
        1
    """

    def __init__(self, domains: Sequence[int]) -> None:
        doms = [int(d) for d in domains]
        if not doms or any(d < 1 for d in doms):
            raise ValueError(f"domains must be positive ints, got {list(domains)!r}")
        self.domains = doms
        self.factors: list[Factor] = []
        self.batch_size: int | None = None

    def add_factor(self, variables: Sequence[int], table: torch.Tensor, log: bool = False) -> None:
        """Add a factor.

        Args:
            variables: Variable indices (distinct), one per table axis.
            table: ``(*dims)`` shared by the batch or ``(B, *dims)``; non-negative
                potentials, or log-potentials with ``log=True``.
            log: Whether ``table`` holds log-potentials.

        Raises:
            ValueError: If the shape disagrees with the variables' domains, indices are out of
                range or repeated, potentials are negative or NaN, or the batch size differs
                from earlier factors.
        """
        vars_ = tuple(int(v) for v in variables)
        if len(set(vars_)) != len(vars_) or not vars_:
            raise ValueError(f"variables must be distinct and non-empty, got {vars_}")
        if any(v < 0 or v >= len(self.domains) for v in vars_):
            raise ValueError(f"variables {vars_} out of range 0..{len(self.domains) - 1}")
        dims = tuple(self.domains[v] for v in vars_)
        table = torch.as_tensor(table)
        if not table.is_floating_point():
            table = table.to(torch.get_default_dtype())
        if tuple(table.shape[-len(dims) :]) != dims or table.ndim not in (len(dims), len(dims) + 1):
            raise ValueError(
                f"factor table shape {tuple(table.shape)} disagrees with variables {vars_} of "
                f"domains {dims} (expected {dims} or (B, *{dims}))"
            )
        if torch.isnan(table).any():
            raise ValueError("factor table contains NaN")
        if log:
            log_table = table.clamp_min(NEG)
        else:
            if (table < 0).any():
                raise ValueError("potentials must be non-negative (pass log=True for logs)")
            log_table = torch.where(table > 0, table.clamp_min(1e-300).log(), NEG)
        if log_table.ndim == len(dims) + 1:
            if self.batch_size not in (None, log_table.shape[0]):
                raise ValueError(
                    f"factor batch size {log_table.shape[0]} differs from {self.batch_size}"
                )
            self.batch_size = log_table.shape[0]
        self.factors.append(Factor(vars_, log_table))

    def structure(self) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
        """Hashable structure (domains and factor scopes), used to cache BP schedules."""
        return tuple(self.domains), tuple(f.variables for f in self.factors)
