"""The procedural audiovisual world, its caption grammar and the tiny captioner."""

from eva_cap.synthetic.avworld import AVWorld, Clip, collate
from eva_cap.synthetic.grammar import (
    DEFAULT_VOCAB,
    Vocabulary,
    WebBias,
    render_caption,
    web_caption,
)
from eva_cap.synthetic.tiny import TinyAVCaptioner, WordTokenizer

__all__ = [
    "DEFAULT_VOCAB",
    "AVWorld",
    "Clip",
    "TinyAVCaptioner",
    "Vocabulary",
    "WebBias",
    "WordTokenizer",
    "collate",
    "render_caption",
    "web_caption",
]
