"""Reward tasks for the benchmark and tests (generated in code, offline)."""

from essam.tasks import arithmetic

__all__ = ["arithmetic"]
