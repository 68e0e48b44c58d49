"""Per-seed results kept on disk, so that the seeds of a long run can run in separate processes.

A seed at the spec's 4000 training steps takes about 40 min of one core; with ``--seed-dir``
each seed's measured cells (the nested ``{part: {model: {metric: value}}}`` dict of
``tasks.run_seed``) are written to ``seed_<n>.json`` beside the configuration they came from,
and a later run with the same configuration reads them instead of training again. A file made
under another configuration is never read: it is recomputed and replaced. The key is the
configuration, not the code: after changing the models or the metrics, delete the folder.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

Cells = dict[str, dict[str, dict[str, float]]]


def config_digest(cfg: dict[str, Any]) -> str:
    """A short, order-independent fingerprint of a benchmark configuration."""
    text = json.dumps(cfg, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_or_run(
    folder: str | Path, cfg: dict[str, Any], seed: int, run: Callable[[], Cells]
) -> tuple[Cells, bool]:
    """The seed's cells from ``folder/seed_<seed>.json`` if made under ``cfg``, else ``run()``.

    Returns ``(cells, reused)``; a fresh result is written before it is returned.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> load_or_run(d, {"steps": 1}, 0, lambda: {"weather": {"m": {"x": 1.0}}})
    ({'weather': {'m': {'x': 1.0}}}, False)
    >>> load_or_run(d, {"steps": 1}, 0, lambda: {})[1]
    True
    >>> load_or_run(d, {"steps": 2}, 0, lambda: {})
    ({}, False)
    """
    path = Path(folder) / f"seed_{seed}.json"
    digest = config_digest(cfg)
    if path.exists():
        saved = json.loads(path.read_text())
        if saved.get("config_digest") == digest and saved.get("seed") == seed:
            return saved["cells"], True
    cells = run()
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"seed": seed, "config_digest": digest, "config": cfg, "cells": cells}
    path.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    return cells, False
