"""Progress bars that are off unless asked for."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def progress(iterable: Iterable[T], enabled: bool = False, **kwargs: object) -> Iterable[T]:
    """Wrap ``iterable`` in a ``tqdm.auto`` bar when ``enabled``; otherwise return it unchanged.

    Library functions take ``progress: bool = False`` and pass it here; ``TQDM_DISABLE=1``
    silences bars globally (tests and CI set it).

    Args:
        iterable: What to iterate over.
        enabled: Show a bar only if True.
        **kwargs: Passed to ``tqdm`` (``desc``, ``total``, ``leave``, ...).

    Returns:
        The iterable, possibly wrapped.
    """
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, **kwargs)
