"""Sampling back-ends: transformers, OpenAI-compatible HTTP, the toy char model, a pool replay."""

from .base import Generator, PoolGenerator

__all__ = ["Generator", "PoolGenerator"]
