"""Synthetic stand-ins: procedural scans and a tiny CLIP trained from scratch (not medical)."""

from easylens.synthetic.scans import (
    MORPHOLOGIES,
    REGIMES,
    SIDES,
    ScanBatch,
    ScanGenerator,
    report,
    reports,
)
from easylens.synthetic.tinyclip import TinyCLIP, TinyTokenizer, tiny_clip_adapter, train_tiny_clip

__all__ = [
    "MORPHOLOGIES",
    "REGIMES",
    "SIDES",
    "ScanBatch",
    "ScanGenerator",
    "TinyCLIP",
    "TinyTokenizer",
    "report",
    "reports",
    "tiny_clip_adapter",
    "train_tiny_clip",
]
