"""Adapters: the :class:`TokenEncoderAdapter` protocol for ViT-style encoders."""

from easylens.adapters.base import GenericViTAdapter, HookedAdapter, TokenEncoderAdapter
from easylens.adapters.libraries import HFCLIPAdapter, OpenCLIPAdapter, TimmViTAdapter

__all__ = [
    "GenericViTAdapter",
    "HFCLIPAdapter",
    "HookedAdapter",
    "OpenCLIPAdapter",
    "TimmViTAdapter",
    "TokenEncoderAdapter",
]
