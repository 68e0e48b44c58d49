"""``easylens.lens``: the wrapper (defined in :mod:`easylens._easylens`)."""

from easylens._easylens import EasyLens, LensReport

__all__ = ["EasyLens", "LensReport"]
