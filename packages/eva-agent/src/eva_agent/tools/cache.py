"""ToolCache: tool outputs keyed by (image hash, tool, args), optionally kept in a JSON file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from eva_agent._validation import as_rgb
from eva_agent.types import Observation


def image_hash(image: Any) -> str:
    """SHA-1 of the RGB pixels and size (the cache key of an image)."""
    img = as_rgb(image)
    h = hashlib.sha1(f"{img.width}x{img.height}".encode())
    h.update(img.tobytes())
    return h.hexdigest()


class ToolCache:
    """A dict of observations; ``path`` makes it an on-disk JSON file (:meth:`save`).

    Only JSON-able observations are cached (OCR, detection, calculator); ``zoom`` items carry
    images and are recomputed.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.data: dict[str, dict[str, Any]] = {}
        self.hits = self.misses = 0
        if self.path is not None and self.path.is_file():
            self.data = json.loads(self.path.read_text())

    @staticmethod
    def key(image: Any, tool: str, args: dict[str, Any]) -> str:
        """The cache key of (image, tool, args)."""
        return f"{image_hash(image)}|{tool}|{json.dumps(args, sort_keys=True)}"

    def wrap(self, tool: Any) -> CachedTool:
        """``tool`` behind this cache."""
        return CachedTool(tool, self)

    def save(self) -> None:
        """Write the cache to ``path`` (no-op without one)."""
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(self.data))


class CachedTool:
    """A tool whose JSON-able observations are memoised in a :class:`ToolCache`."""

    def __init__(self, tool: Any, cache: ToolCache) -> None:
        self.tool, self.cache = tool, cache
        self.name, self.kind, self.schema = tool.name, tool.kind, tool.schema

    def __call__(self, image: Any, **args: Any) -> Observation:
        """Run the wrapped tool, memoised."""
        key = self.cache.key(image, self.name, args)
        hit = self.cache.data.get(key)
        if hit is not None:
            self.cache.hits += 1
            return Observation(hit["status"], [dict(i) for i in hit["items"]], hit["diagnosis"])
        self.cache.misses += 1
        obs = self.tool(image, **args)
        try:
            rec = {"status": obs.status, "items": obs.items, "diagnosis": obs.diagnosis}
            json.dumps(rec)
        except TypeError:
            return obs
        self.cache.data[key] = json.loads(json.dumps(rec))
        return obs
