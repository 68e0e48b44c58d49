"""The neural PLVM module (defined in :mod:`plvm._plvm`, the method's own module)."""

from plvm._plvm import PLVM, Batch

__all__ = ["PLVM", "Batch"]
