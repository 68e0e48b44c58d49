"""Argument checks shared by the engines: the program interface and seed-or-generator."""

from __future__ import annotations

from typing import Any

import torch

from em_nesy.programs import SymbolicProgram
from methodkit.torch import generator as seeded_generator


def check_program(program: Any) -> None:
    """Raise ``TypeError`` unless ``program`` implements :class:`SymbolicProgram`."""
    if not isinstance(program, SymbolicProgram):
        raise TypeError(
            "program must implement SymbolicProgram (domains, split_labels, consistent, "
            f"distance), got {type(program).__name__}"
        )


def as_generator(generator: torch.Generator | int | None) -> torch.Generator | None:
    """Pass a generator (or None) through; turn an int seed into a seeded CPU generator.

    Raises:
        TypeError: If ``generator`` is neither a generator, an int nor None.
        ValueError: If the seed is negative.
    """
    if generator is None or isinstance(generator, torch.Generator):
        return generator
    if isinstance(generator, bool) or not isinstance(generator, int):
        raise TypeError(
            f"generator must be a torch.Generator, an int seed or None, got {generator}"
        )
    return seeded_generator(generator)
