"""Logging helpers: library modules get loggers, only scripts configure handlers."""

from __future__ import annotations

import logging

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def get_logger(name: str) -> logging.Logger:
    """Return ``logging.getLogger(name)``; library modules call it with ``__name__``."""
    return logging.getLogger(name)


def setup_logging(level: int | str = logging.INFO) -> None:
    """Configure the root logger for a script (never call this from library code).

    Args:
        level: A ``logging`` level or its name (``"INFO"``, ``"DEBUG"``...).

    Raises:
        ValueError: If ``level`` is an unknown level name.
    """
    if isinstance(level, str):
        resolved = logging.getLevelName(level.upper())
        if not isinstance(resolved, int):
            raise ValueError(f"unknown logging level {level!r}")
        level = resolved
    logging.basicConfig(level=level, format=_FORMAT, force=True)
