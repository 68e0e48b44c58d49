"""Procedural data for the small-scale reproduction (a synthetic stand-in for RefCOCO)."""

from edit_ris.data.shapes import COLOURS, EDIT_COLOURS, SHAPES, ShapeRefGenerator, ShapeRefItem

__all__ = ["COLOURS", "EDIT_COLOURS", "SHAPES", "ShapeRefGenerator", "ShapeRefItem"]
