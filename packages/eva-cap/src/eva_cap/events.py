"""The event schema: atomic audiovisual events, event sets and temporal relations."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from methodkit.checks import check_real

__all__ = [
    "MODALITIES",
    "AtomicEvent",
    "EventSet",
    "Relation",
    "relations_from_caption_order",
    "relations_from_intervals",
]

#: The allowed event modalities.
MODALITIES = ("visual", "audio", "audiovisual")


class Relation(StrEnum):
    """Temporal relation between two consecutive events: ``before`` ("then") or ``overlap``."""

    BEFORE = "before"
    OVERLAP = "overlap"


@dataclass(frozen=True)
class AtomicEvent:
    """One atomic audiovisual event: who (subject) does what (action), seen and/or heard, when.

    Attributes:
        modality: ``"visual"``, ``"audio"`` or ``"audiovisual"``.
        subject: The entity, or for sounds the sound source ("dog", "someone off-screen").
        action: The verb ("run", "bark").
        obj: Optional object of the action.
        t_start: Optional onset (any time unit; a finite real number).
        t_end: Optional offset (finite, ``>= t_start``).

    Raises:
        ValueError: On an unknown modality, an empty subject or action, a NaN or infinite
            time, or ``t_end < t_start``.
        TypeError: On a time that is not a real number or an ``obj`` that is not a str.
    """

    modality: str
    subject: str
    action: str
    obj: str | None = None
    t_start: float | None = None
    t_end: float | None = None

    def __post_init__(self) -> None:
        if self.modality not in MODALITIES:
            raise ValueError(f"modality must be one of {MODALITIES}, got {self.modality!r}")
        for name in ("subject", "action"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        if self.obj is not None and not isinstance(self.obj, str):
            raise TypeError(f"obj must be a str or None, got {self.obj!r}")
        for name in ("t_start", "t_end"):
            if getattr(self, name) is not None:
                check_real(name, getattr(self, name))  # NaN would pass every comparison
        if self.t_start is not None and self.t_end is not None and self.t_end < self.t_start:
            raise ValueError(f"t_end must be >= t_start, got t_start={self.t_start}, "
                             f"t_end={self.t_end}")  # fmt: skip

    @property
    def has_time(self) -> bool:
        """Whether both timestamps are set."""
        return self.t_start is not None and self.t_end is not None

    def interval(self) -> tuple[float, float]:
        """``(t_start, t_end)``.

        Raises:
            ValueError: If a timestamp is missing.
        """
        if self.t_start is None or self.t_end is None:
            raise ValueError(f"{self} has no interval: t_start and t_end must both be set")
        return self.t_start, self.t_end

    def without_time(self) -> AtomicEvent:
        """The same event with the timestamps removed."""
        return AtomicEvent(self.modality, self.subject, self.action, self.obj)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``None`` fields dropped)."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AtomicEvent:
        """Inverse of :meth:`to_dict` (accepts ``"object"`` for ``obj``).

        Raises:
            TypeError: If ``d`` is not a dict.
            ValueError: If ``modality``, ``subject`` or ``action`` is missing, or on the
                constructor's errors.
        """
        if not isinstance(d, dict):
            raise TypeError(f"an event must be a dict, got {type(d).__name__}")
        missing = [k for k in ("modality", "subject", "action") if k not in d]
        if missing:
            raise ValueError(f"event dict is missing {missing}: {d!r}")
        return cls(
            modality=d["modality"],
            subject=d["subject"],
            action=d["action"],
            obj=d.get("obj", d.get("object")),
            t_start=d.get("t_start"),
            t_end=d.get("t_end"),
        )


def relations_from_intervals(events: Sequence[AtomicEvent]) -> list[Relation]:
    """Relations between consecutive events: overlap iff ``t_start[a+1] < t_end[a]``.

    Raises:
        ValueError: If an event lacks a timestamp.
    """
    for e in events:
        if not e.has_time:
            raise ValueError(f"relations_from_intervals needs timestamps, got {e}")
    return [
        Relation.OVERLAP if b.interval()[0] < a.interval()[1] else Relation.BEFORE
        for a, b in itertools.pairwise(events)
    ]


#: Connectives read as a temporal relation between consecutive clauses.
CONNECTIVES = {
    "then": Relation.BEFORE,
    "and then": Relation.BEFORE,
    "after that": Relation.BEFORE,
    "before": Relation.BEFORE,
    "while": Relation.OVERLAP,
    "as": Relation.OVERLAP,
    "meanwhile": Relation.OVERLAP,
    "and": Relation.OVERLAP,
}


def relations_from_caption_order(connectives: Iterable[str]) -> list[Relation]:
    """Relations read from the connectives between consecutive clauses ("then", "while").

    Raises:
        ValueError: On a connective outside :data:`CONNECTIVES`.
    """
    out = []
    for c in connectives:
        key = " ".join(str(c).lower().split())
        if key not in CONNECTIVES:
            raise ValueError(f"unknown connective {c!r}; allowed: {sorted(CONNECTIVES)}")
        out.append(CONNECTIVES[key])
    return out


class EventSet(Sequence[AtomicEvent]):
    """The ground-truth events of a clip, sorted by onset, with their consecutive relations.

    Args:
        events: The events. With timestamps on every event they are sorted by onset (stable)
            and ``relations`` default to :func:`relations_from_intervals`.
        relations: Explicit relations (``len(events) - 1``), needed when events lack times.

    Raises:
        TypeError: If ``events`` is not an iterable of :class:`AtomicEvent`.
        ValueError: If ``relations`` has the wrong length, an unknown entry, or is missing for
            untimed events.
    """

    def __init__(
        self, events: Iterable[AtomicEvent], relations: Sequence[Relation | str] | None = None
    ) -> None:
        try:
            evs = list(events)
        except TypeError:
            raise TypeError(
                f"events must be an iterable of AtomicEvent, got {type(events).__name__}"
            ) from None
        for e in evs:
            if not isinstance(e, AtomicEvent):
                raise TypeError(f"events must be AtomicEvent, got {type(e).__name__}")
        self.timed = bool(evs) and all(e.has_time for e in evs)
        if self.timed:
            evs = sorted(evs, key=lambda e: e.interval()[0])
        self.events: tuple[AtomicEvent, ...] = tuple(evs)
        if relations is None:
            if not self.timed and len(evs) > 1:
                raise ValueError("events without timestamps need explicit relations")
            rel = relations_from_intervals(evs) if self.timed else []
        else:
            allowed = [r.value for r in Relation]
            bad = [r for r in relations if r not in allowed]
            if isinstance(relations, str) or bad:
                raise ValueError(f"relations must be a list of {allowed}, got {relations!r}")
            rel = [Relation(r) for r in relations]
            if len(rel) != max(len(evs) - 1, 0):
                raise ValueError(f"relations must have len(events) - 1 = {max(len(evs) - 1, 0)} "
                                 f"entries, got {len(rel)}")  # fmt: skip
        self.relations: tuple[Relation, ...] = tuple(rel)

    def __getitem__(self, i: Any) -> Any:
        return self.events[i]

    def __len__(self) -> int:
        return len(self.events)

    def __repr__(self) -> str:
        return f"EventSet({list(self.events)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EventSet):
            return NotImplemented
        return self.events == other.events and self.relations == other.relations

    def to_json(self) -> str:
        """JSON list of events (the ``gold_events`` dataset column for TRL)."""
        return json.dumps([e.to_dict() for e in self.events])

    @classmethod
    def coerce(cls, gold: Any) -> EventSet:
        """An :class:`EventSet` from an EventSet, a list of events/dicts, or their JSON text.

        Raises:
            ValueError: If a JSON text does not parse (the decoder's message is kept), or on
                the errors of :class:`AtomicEvent` and :class:`EventSet`.
            TypeError: If ``gold`` (or the JSON it holds) is not one of the accepted forms.
        """
        if isinstance(gold, EventSet):
            return gold
        if isinstance(gold, str):
            try:
                gold = json.loads(gold)
            except json.JSONDecodeError as e:
                raise ValueError(f"gold events are not valid JSON ({e}): {gold[:80]!r}") from None
        if not isinstance(gold, (list, tuple, dict)):
            raise TypeError(
                "gold events must be an EventSet, a list of events or dicts, "
                f'{{"events": [...], "relations": [...]}} or its JSON text; '
                f"got {type(gold).__name__}"
            )
        if isinstance(gold, dict):
            if "events" not in gold:
                raise TypeError(f'a gold dict needs an "events" key, got keys {sorted(gold)}')
            evs = [e if isinstance(e, AtomicEvent) else AtomicEvent.from_dict(e)
                   for e in gold["events"]]  # fmt: skip
            return cls(evs, gold.get("relations"))
        evs = [e if isinstance(e, AtomicEvent) else AtomicEvent.from_dict(e) for e in gold]
        return cls(evs)
