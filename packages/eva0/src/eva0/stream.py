"""Run any test-time adaptation method over a labelled stream and score it."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sized
from typing import Any

import torch

from methodkit import progress as show_progress

__all__ = ["adapt_stream"]


def _calls(method: Any) -> int:
    stats = getattr(method, "stats", None)
    if stats is not None and hasattr(stats, "forward_passes"):
        return int(stats.forward_passes)
    return int(getattr(method, "forward_passes", 0))


def adapt_stream(
    method: Any,
    loader: Iterable[tuple[torch.Tensor, torch.Tensor]],
    device: torch.device | str | None = None,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Feed ``(x, y)`` batches to ``method.forward(x)`` in order; labels only score.

    Args:
        method: Any object whose ``forward(x)`` (or ``__call__``) returns (B, C) scores.
        loader: Iterable of ``(x, y)`` batches.
        device: Move batches there first (``None``: leave them).
        progress: A bar over the batches: ``None`` (default) on a terminal only, ``True``
            always, ``False`` never (``TQDM_DISABLE=1`` silences it).

    Returns:
        ``{"accuracy", "n", "seconds", "forward_passes", "per_batch"}`` where ``per_batch``
        lists each batch's accuracy and ``forward_passes`` counts the method's model calls
        (read from ``method.stats.forward_passes`` or ``method.forward_passes``).

    Raises:
        ValueError: If the stream is empty or a batch's scores are not (B, C).
    """
    correct, n, per_batch = 0, 0, []
    start_calls = _calls(method)
    t0 = time.perf_counter()
    total = len(loader) if isinstance(loader, Sized) else None
    for x, y in show_progress(loader, enabled=progress, desc="adapt stream", total=total):
        if device is not None:
            x, y = x.to(device), y.to(device)
        out = method(x)
        if out.dim() != 2 or out.shape[0] != x.shape[0]:
            raise ValueError(
                f"method returned shape {tuple(out.shape)} for a batch of {x.shape[0]}"
            )
        hit = int((out.argmax(1) == y).sum())
        correct += hit
        n += int(y.shape[0])
        per_batch.append(hit / int(y.shape[0]))
    seconds = time.perf_counter() - t0
    if n == 0:
        raise ValueError("loader yielded no batch")
    return {
        "accuracy": correct / n,
        "n": n,
        "seconds": seconds,
        "forward_passes": _calls(method) - start_calls,
        "per_batch": per_batch,
    }
