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
from edit_ris.backbones.tiny import TinyEditor
from edit_ris.backbones.tiny_training import train_tiny_editor
from edit_ris.backbones.word_tokenizer import WordTokenizer

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
