"""Editing backbones: the protocol, the tiny from-scratch editor and the diffusers adapter."""

from edit_ris.backbones.base import (
    Capture,
    CaptureError,
    CaptureSpec,
    EditingBackbone,
    LayerInfo,
    TokenBatch,
)
from edit_ris.backbones.diffusers_ip2p import DiffusersIP2PBackbone
from edit_ris.backbones.tiny import TinyEditor, WordTokenizer, train_tiny_editor

__all__ = [
    "Capture",
    "CaptureError",
    "CaptureSpec",
    "DiffusersIP2PBackbone",
    "EditingBackbone",
    "LayerInfo",
    "TinyEditor",
    "TokenBatch",
    "WordTokenizer",
    "train_tiny_editor",
]
