"""Offline data shared by several packages (CONTRIBUTING.md §9): no network, ever.

The digits serve em-nesy, eris-fl, engine-zo, eva0 and hel; the pinned standard-library text
serves ema-nesterov and is planned for emo-moe's prose domain.
"""

from methodkit.data._digits import load_digits_arrays, split_digits
from methodkit.data._text import PINNED_SHA256, StdlibText, load_stdlib_text

__all__ = [
    "PINNED_SHA256",
    "StdlibText",
    "load_digits_arrays",
    "load_stdlib_text",
    "split_digits",
]
