"""Progress bars for long library calls: on a terminal by default, silent elsewhere."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")

_FALSE = {"", "0", "false", "no", "off"}


def progress_wanted(enabled: bool | None) -> bool:
    """Whether a bar should show: ``TQDM_DISABLE`` wins, then ``enabled``, else a terminal.

    ``enabled=None`` (the library default) shows a bar only when standard error is a terminal,
    so scripts, logs, notebooks' captured output and CI stay clean while an interactive user
    sees long work move.
    """
    if os.environ.get("TQDM_DISABLE", "").strip().lower() not in _FALSE:
        return False
    if enabled is not None:
        return bool(enabled)
    stream = sys.stderr
    return stream is not None and hasattr(stream, "isatty") and stream.isatty()


def progress(iterable: Iterable[T], enabled: bool | None = False, **kwargs: object) -> Iterable[T]:
    """Wrap ``iterable`` in a ``tqdm.auto`` bar when a bar is wanted; else return it unchanged.

    Library functions that can run longer than about ten seconds take
    ``progress: bool | None = None`` and pass it here: ``None`` shows a bar on a terminal only,
    ``True`` always, ``False`` never. ``TQDM_DISABLE=1`` silences every bar (tests and CI set it).

    Args:
        iterable: What to iterate over.
        enabled: ``True``/``False`` to force the bar on or off, ``None`` for "on a terminal".
        **kwargs: Passed to ``tqdm`` (``desc``, ``total``, ``leave``, ...).

    Returns:
        The iterable, possibly wrapped.

    Example:
        >>> from methodkit import progress
        >>> list(progress(range(3), enabled=False))
        [0, 1, 2]
    """
    if not progress_wanted(enabled):
        return iterable
    from tqdm.auto import tqdm

    # tqdm bakes TQDM_* variables into its defaults at import; the decision is made above.
    kwargs.setdefault("disable", False)
    return tqdm(iterable, **kwargs)
