"""The synthetic caption grammar and the web-caption bias model.

Clauses in onset order, joined by "then" (the next event starts after the previous ends) or
"while" (overlap): "we see the dog run", "we hear the dog bark", "we see and hear the man
speak", "we hear someone off-screen speak", "we hear music".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from eva_cap.events import AtomicEvent, EventSet, Relation, relations_from_intervals

__all__ = [
    "DEFAULT_VOCAB",
    "Vocabulary",
    "WebBias",
    "caption_words",
    "render_caption",
    "render_clauses",
    "web_caption",
]

OFFSCREEN = "someone off-screen"
MUSIC = "music"


@dataclass(frozen=True)
class Vocabulary:
    """Entities, visual actions and sounds of the grammar (sound -> possible sources)."""

    entities: tuple[str, ...] = ("man", "woman", "dog", "car", "bird", "ball")
    visual_actions: tuple[str, ...] = ("walk", "run", "jump", "wave", "enter", "fall")
    sounds: dict[str, tuple[str, ...]] = field(
        default_factory=lambda: {
            "speak": ("man", "woman"),
            "bark": ("dog",),
            "honk": ("car",),
            "chirp": ("bird",),
            "thud": ("ball",),
            "music": (),
        }
    )

    @property
    def subjects(self) -> tuple[str, ...]:
        """Every subject a clause can name (entities, off-screen speaker, music)."""
        return (*self.entities, OFFSCREEN, MUSIC)

    @property
    def actions(self) -> tuple[str, ...]:
        """Every action a clause can name."""
        return (*self.visual_actions, *self.sounds)

    @property
    def words(self) -> tuple[str, ...]:
        """Every word the grammar produces (the tiny captioner's vocabulary)."""
        fixed = ("we", "see", "hear", "and", "the", "then", "while", "someone", "off-screen")
        return tuple(dict.fromkeys((*fixed, *self.entities, *self.actions)))


DEFAULT_VOCAB = Vocabulary()


def _clause(e: AtomicEvent) -> str:
    if e.modality == "visual":
        return f"we see the {e.subject} {e.action}"
    if e.modality == "audiovisual":
        return f"we see and hear the {e.subject} {e.action}"
    if e.subject == MUSIC:
        return "we hear music"
    if e.subject == OFFSCREEN:
        return f"we hear {OFFSCREEN} {e.action}"
    return f"we hear the {e.subject} {e.action}"


def render_clauses(events: Sequence[AtomicEvent], relations: Sequence[Relation]) -> str:
    """Clauses in the given order joined by the connectives of ``relations``."""
    if len(relations) != max(len(events) - 1, 0):
        raise ValueError(f"need {max(len(events) - 1, 0)} relations, got {len(relations)}")
    parts = [_clause(events[0])] if events else []
    for e, r in zip(events[1:], relations, strict=True):
        parts.append("while" if Relation(r) is Relation.OVERLAP else "then")
        parts.append(_clause(e))
    return " ".join(parts)


def render_caption(events: EventSet | Sequence[AtomicEvent]) -> str:
    """The reference caption of a clip: onset order, connectives from the intervals."""
    es = events if isinstance(events, EventSet) else EventSet(events)
    return render_clauses(es.events, es.relations)


def caption_words(caption: str) -> list[str]:
    """The caption's words (lower case, whitespace split, final period dropped)."""
    return caption.lower().replace(".", " ").replace(",", " ").split()


@dataclass(frozen=True)
class WebBias:
    """Systematic biases of raw "web" captions (probabilities)."""

    omit_audio: float = 0.4  # each audio-only event is left out
    av_as_visual: float = 0.5  # each audiovisual event is described as visual only
    group_by_modality: float = 0.6  # clauses grouped visual -> audiovisual -> audio


def web_caption(
    events: EventSet, rng: np.random.Generator, bias: WebBias = WebBias()
) -> tuple[str, list[AtomicEvent]]:
    """A biased caption of ``events`` and the events it describes (in clause order).

    Connectives are recomputed from the intervals of consecutive clauses after reordering.
    """
    described = []
    for e in events:
        if e.modality == "audio" and rng.random() < bias.omit_audio:
            continue
        if e.modality == "audiovisual" and rng.random() < bias.av_as_visual:
            e = AtomicEvent("visual", e.subject, e.action, e.obj, e.t_start, e.t_end)
        described.append(e)
    if described and rng.random() < bias.group_by_modality:
        rank = {"visual": 0, "audiovisual": 1, "audio": 2}
        described = sorted(described, key=lambda e: rank[e.modality])  # stable: onset order
    return render_clauses(described, relations_from_intervals(described)), described
