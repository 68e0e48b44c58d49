"""The bool check of the configuration objects (int and real checks come from methodkit.checks)."""

from __future__ import annotations


def check_bool(name: str, value: object) -> bool:
    """TypeError unless ``value`` is a bool."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value
