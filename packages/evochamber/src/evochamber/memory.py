"""An agent's private archive: per-niche sections plus a cross-domain section, capacity C.

Value of an item at time t (inferred): ``quality * exp(-(t - t_used) / tau)``. When full,
an add evicts the lowest-value item outside the protected niche (the agent's top niche) first;
an incoming item that would evict a higher-value item is dropped.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from evochamber.types import Experience, Insight
from methodkit.checks import check_int, check_real

CROSS_DOMAIN = "*"  # the niche label of the cross-domain section


class MemoryArchive:
    """Bounded insight archive with value-based eviction and a short experience log.

    Args:
        capacity: Most insights held (C >= 1).
        tau: Recency time constant of the value (> 0).
        experience_capacity: Length of the experience log (kept apart from the C insights).

    Example:
        >>> from evochamber.types import Insight
        >>> a = MemoryArchive(capacity=1)
        >>> a.add(Insight("i1", "math", "check units", quality=0.9), t=0)
        True
        >>> a.add(Insight("i2", "code", "weak tip", quality=0.2), t=0)  # would evict a better item
        False
    """

    def __init__(
        self, capacity: int = 8, tau: float = 300.0, experience_capacity: int = 20
    ) -> None:
        self.capacity = check_int("capacity", capacity, low=1)
        self.tau = check_real("tau", tau, 0.0, low_open=True)
        self.items: list[Insight] = []
        self.experiences: deque[Experience] = deque(maxlen=max(1, int(experience_capacity)))

    def __len__(self) -> int:
        return len(self.items)

    def value(self, item: Insight, t: int) -> float:
        """``quality * exp(-(t - t_used) / tau)``."""
        used = item.t_used if item.t_used is not None else item.t_created
        return item.quality * math.exp(-max(0, t - used) / self.tau)

    def find(self, key: str | None) -> Insight | None:
        """The item about ``key`` (None when there is none or ``key`` is None)."""
        if key is None:
            return None
        return next((it for it in self.items if it.key == key), None)

    def evict(self, t: int, protect: str | None = None) -> Insight | None:
        """Remove and return the lowest-value item, outside niche ``protect`` first."""
        victim = self._victim(t, protect)
        if victim is not None:
            self.items.remove(victim)
        return victim

    def _victim(self, t: int, protect: str | None) -> Insight | None:
        if not self.items:
            return None
        pool = [it for it in self.items if it.niche != protect] or self.items
        return min(pool, key=lambda it: (self.value(it, t), it.t_created, it.id))

    def add(self, item: Insight, t: int, protect: str | None = None) -> bool:
        """Store a copy of ``item``; True when it is held afterwards.

        An item with the key of a held one refreshes it (higher quality, ``t_used = t``)
        instead of taking a second slot.
        """
        same = self.find(item.key)
        if same is not None:
            same.quality = max(same.quality, item.quality)
            same.t_used = t
            return True
        new = item.copy(t_used=t)
        if len(self.items) >= self.capacity:
            victim = self._victim(t, protect)
            if victim is not None and self.value(victim, t) > self.value(new, t):
                return False  # the incoming item is worth less than what it would evict
            self.evict(t, protect)
        self.items.append(new)
        return True

    def retrieve(self, niche: str, r: int, t: int | None = None) -> list[Insight]:
        """Up to ``r`` highest-value items of ``niche`` and the cross-domain section.

        Marks them used at ``t`` (when given), which refreshes their value.
        """
        now = t if t is not None else max((it.t_used or 0 for it in self.items), default=0)
        pool = [it for it in self.items if it.niche in (niche, CROSS_DOMAIN)]
        pool.sort(key=lambda it: (-self.value(it, now), it.id))
        out = pool[: max(0, r)]
        if t is not None:
            self.touch(out, t)
        return out

    def touch(self, items: Iterable[Insight], t: int) -> None:
        """Mark ``items`` used at ``t``."""
        for it in items:
            it.t_used = t
            it.uses += 1

    def profile(self, niches: list[str]) -> list[float]:
        """Niche histogram of the archive, in the order of ``niches``."""
        counts = {k: 0 for k in niches}
        for it in self.items:
            if it.niche in counts:
                counts[it.niche] += 1
        return [float(counts[k]) for k in niches]

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {
            "capacity": self.capacity,
            "tau": self.tau,
            "experience_capacity": self.experiences.maxlen,
            "items": [it.to_dict() for it in self.items],
            "experiences": [e.to_dict() for e in self.experiences],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MemoryArchive:
        """Rebuild from :meth:`to_dict`'s output."""
        a = cls(int(d["capacity"]), float(d["tau"]), int(d.get("experience_capacity", 20)))
        a.items = [Insight.from_dict(x) for x in d["items"]]
        a.experiences.extend(Experience(**x) for x in d.get("experiences", []))
        return a
