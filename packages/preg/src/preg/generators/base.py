"""The generator protocol every back-end implements, and a pool-replay generator."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from ..types import Path

__all__ = ["Generator", "PoolGenerator"]


@runtime_checkable
class Generator(Protocol):
    """A sampling back-end.

    ``sample`` draws ``n`` independent continuations of ``prompt`` of at most
    ``max_new_tokens`` tokens; ``continue_`` extends each given path (a prefix of a continuation
    of ``prompt``) to at most ``max_new_tokens`` tokens in total, returning the full paths
    (prefix tokens unchanged). ``supports_logprobs`` says whether paths carry real log-probs.
    """

    supports_logprobs: bool

    def sample(
        self,
        prompt: str,
        n: int,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Path]:
        """Sample ``n`` paths."""
        ...

    def continue_(
        self,
        prompt: str,
        paths: Sequence[Path],
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Path]:
        """Continue each path to at most ``max_new_tokens`` tokens in total."""
        ...


class PoolGenerator:
    """Replays a stored pool of full samples per prompt as if it were a live model.

    ``sample`` draws ``n`` distinct pool paths (uniformly, without replacement) and truncates them
    to ``max_new_tokens``; ``continue_`` reveals more of the same stored path. Continuing a
    sampled prefix has exactly the distribution of the rest of a full sample, so any method run
    on this generator is distributed like the method run live (with paths drawn without
    replacement from the pool).

    Args:
        pools: prompt -> list of full (finished or budget-truncated) paths.
        seed: seed of the draws (``sample``'s own ``seed`` argument, when given, overrides it).
    """

    supports_logprobs = True

    def __init__(self, pools: Mapping[str, Sequence[Path]], seed: int | None = None) -> None:
        self.pools = pools
        self._rng = np.random.default_rng(seed)

    def sample(
        self,
        prompt: str,
        n: int,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Path]:
        """Draw ``n`` stored paths without replacement, truncated to ``max_new_tokens``."""
        pool = self.pools[prompt]
        if n > len(pool):
            raise ValueError(f"n={n} exceeds the {len(pool)} stored paths for this prompt")
        rng = self._rng if seed is None else np.random.default_rng(seed)
        idx = rng.choice(len(pool), size=n, replace=False)
        out = []
        for i in idx:
            p = pool[int(i)]
            t = p.truncate(max_new_tokens)
            if t is p:  # shares the stored object; keep a pointer back to it
                t = Path(**{**p.__dict__, "meta": {**p.meta, "pool_index": int(i)}})
            else:
                t.meta["pool_index"] = int(i)
            out.append(t)
        return out

    def continue_(
        self,
        prompt: str,
        paths: Sequence[Path],
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Path]:
        """Reveal each stored path up to ``max_new_tokens`` tokens."""
        pool = self.pools[prompt]
        out = []
        for p in paths:
            if "pool_index" not in p.meta:
                raise ValueError("PoolGenerator can only continue paths it sampled itself")
            full = pool[p.meta["pool_index"]]
            t = full.truncate(max_new_tokens)
            t = Path(**{**t.__dict__, "meta": {**t.meta, "pool_index": p.meta["pool_index"]}})
            out.append(t)
        return out
