"""Sampling back-ends: transformers, OpenAI-compatible HTTP, the toy char model, a pool replay."""

from .base import Generator, PoolGenerator
from .chat import GeneratorChat

__all__ = ["Generator", "GeneratorChat", "PoolGenerator"]
