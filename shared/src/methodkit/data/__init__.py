"""Offline data shared by several packages (conventions §14): no network, ever."""

from methodkit.data._digits import digits_images, load_digits_arrays, split_digits
from methodkit.data._text import PINNED_SHA256, StdlibText, load_stdlib_text

__all__ = [
    "PINNED_SHA256",
    "StdlibText",
    "digits_images",
    "load_digits_arrays",
    "load_stdlib_text",
    "split_digits",
]
