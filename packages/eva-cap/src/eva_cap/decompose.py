"""Caption -> atomic events: the exact grammar decomposer and an LLM-backed decomposer."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from eva_cap.events import AtomicEvent, Relation, relations_from_caption_order
from eva_cap.synthetic.grammar import DEFAULT_VOCAB, MUSIC, OFFSCREEN, Vocabulary, caption_words

__all__ = [
    "DEFAULT_PROMPT",
    "Decomposer",
    "GrammarDecomposer",
    "LLMDecomposer",
    "ParsedCaption",
]


@dataclass(frozen=True)
class ParsedCaption:
    """Events of a caption in clause order, relations between consecutive clauses, parse flag."""

    events: tuple[AtomicEvent, ...] = ()
    relations: tuple[Relation, ...] = ()
    ok: bool = False


FAILED = ParsedCaption((), (), False)


@runtime_checkable
class Decomposer(Protocol):
    """Anything that maps a caption to a :class:`ParsedCaption`."""

    def __call__(self, caption: str) -> ParsedCaption:
        """Decompose one caption."""
        ...


class GrammarDecomposer:
    """The exact inverse of the synthetic caption grammar (:mod:`eva_cap.synthetic.grammar`).

    A caption parses when every clause between the connectives "then"/"while" is one of
    "we see the S A", "we hear the S A", "we see and hear the S A", "we hear someone
    off-screen A", "we hear music", with S and A in the vocabulary. The empty caption does
    not parse.

    Args:
        vocab: The grammar's vocabulary (default: the synthetic world's).
    """

    def __init__(self, vocab: Vocabulary = DEFAULT_VOCAB) -> None:
        self.vocab = vocab
        self._subjects = set(vocab.subjects)
        self._actions = set(vocab.actions)

    def _clause(self, w: list[str]) -> AtomicEvent | None:
        if w == ["we", "hear", MUSIC]:
            return AtomicEvent("audio", MUSIC, MUSIC)
        if len(w) == 5 and w[:3] == ["we", "hear", "someone"] and w[3] == "off-screen":
            return AtomicEvent("audio", OFFSCREEN, w[4]) if w[4] in self._actions else None
        heads: dict[tuple[str, ...], str] = {
            ("we", "see", "the"): "visual",
            ("we", "hear", "the"): "audio",
        }
        if len(w) == 5 and tuple(w[:3]) in heads:
            mod, subj, act = heads[tuple(w[:3])], w[3], w[4]
        elif len(w) == 7 and w[:5] == ["we", "see", "and", "hear", "the"]:
            mod, subj, act = "audiovisual", w[5], w[6]
        else:
            return None
        if subj not in self._subjects or act not in self._actions:
            return None
        return AtomicEvent(mod, subj, act)

    def __call__(self, caption: str) -> ParsedCaption:
        """Parse ``caption``; ``ok=False`` (no events) when any clause is off-grammar."""
        words = caption_words(caption) if isinstance(caption, str) else []
        if not words:
            return FAILED
        clauses: list[list[str]] = [[]]
        connectives = []
        for w in words:
            if w in ("then", "while"):
                connectives.append(w)
                clauses.append([])
            else:
                clauses[-1].append(w)
        events = [e for e in (self._clause(c) for c in clauses) if e is not None]
        if len(events) < len(clauses):  # an off-grammar clause
            return FAILED
        rel = relations_from_caption_order(connectives)
        return ParsedCaption(tuple(events), tuple(rel), True)


DEFAULT_PROMPT = (
    "Decompose the audiovisual caption into atomic events. Answer with JSON only: "
    '{{"events": [{{"modality": "visual|audio|audiovisual", "subject": "...", "action": "...", '
    '"t_start": null, "t_end": null}}], "relations": ["before|overlap", ...]}} where relations '
    "holds one entry per pair of consecutive events, in caption order.\nCaption: {caption}\nJSON:"
)


def _text_of(out: Any) -> str:
    """The generated text of a str, an HF pipeline output or a chat message list."""
    if isinstance(out, str):
        return out
    if isinstance(out, list) and out:
        return _text_of(out[0])
    if isinstance(out, dict):
        for key in ("generated_text", "content", "text"):
            if key in out:
                return _text_of(out[key]) if not isinstance(out[key], str) else out[key]
    raise TypeError(f"cannot read generated text from {type(out).__name__}")


def _first_json(text: str) -> Any:
    """The first decodable JSON object or array in ``text``."""
    dec = json.JSONDecoder()
    for m in re.finditer(r"[\[{]", text):
        try:
            return dec.raw_decode(text[m.start() :])[0]
        except json.JSONDecodeError:
            continue
    raise ValueError("no JSON in the output")


class LLMDecomposer:
    """Caption decomposition by any text generator (HF pipeline, vLLM client, API wrapper).

    The output must hold JSON ``{"events": [...], "relations": [...]}`` (or a bare list of
    events, with relations then read from their timestamps, or "before" if untimed). Output
    that is not valid JSON of this schema gives ``ParsedCaption(ok=False)``, never an
    exception, so a reward built on it stays defined.

    Args:
        generate_fn: ``str -> str`` (or an HF ``pipeline`` returning ``[{"generated_text"}]``).
        prompt_template: A ``str.format`` template with a ``{caption}`` field.

    Example:
        >>> dec = LLMDecomposer(lambda p: '[{"modality": "audio", "subject": "dog", '
        ...                     '"action": "bark"}]')
        >>> dec("we hear a dog barking").events[0].subject
        'dog'
    """

    def __init__(
        self, generate_fn: Callable[[str], Any], prompt_template: str = DEFAULT_PROMPT
    ) -> None:
        if not callable(generate_fn):
            raise TypeError(f"generate_fn must be callable, got {type(generate_fn).__name__}")
        if "{caption}" not in prompt_template:
            raise ValueError("prompt_template must contain a '{caption}' field")
        self.generate_fn = generate_fn
        self.prompt_template = prompt_template

    def __call__(self, caption: str) -> ParsedCaption:
        """Decompose ``caption``; ``ok=False`` when the output is not valid schema JSON."""
        out = self.generate_fn(self.prompt_template.format(caption=caption))
        try:
            text = _text_of(out)
            if text.startswith(self.prompt_template.format(caption=caption)):
                text = text[len(self.prompt_template.format(caption=caption)) :]
            data = _first_json(text)
            raw = data["events"] if isinstance(data, dict) else data
            if not isinstance(raw, list) or not raw:
                return FAILED
            events = tuple(AtomicEvent.from_dict(e) for e in raw)
            rel_raw = data.get("relations") if isinstance(data, dict) else None
            if rel_raw is None:
                timed = all(e.has_time for e in events)
                rel = [
                    Relation.OVERLAP
                    if timed and b.interval()[0] < a.interval()[1]
                    else Relation.BEFORE
                    for a, b in itertools.pairwise(events)
                ]
            else:
                rel = [Relation(str(r).lower()) for r in rel_raw]
            if len(rel) != len(events) - 1:
                return FAILED
        except (ValueError, TypeError, KeyError, AttributeError):
            return FAILED
        return ParsedCaption(events, tuple(rel), True)
