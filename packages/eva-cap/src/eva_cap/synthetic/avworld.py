"""A procedural audiovisual world: event streams with fixed random codes plus noise."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from eva_cap.events import AtomicEvent, EventSet
from eva_cap.synthetic.grammar import (
    DEFAULT_VOCAB,
    MUSIC,
    OFFSCREEN,
    Vocabulary,
    WebBias,
    render_caption,
    web_caption,
)
from methodkit.checks import check_int, check_real

__all__ = ["AVWorld", "Clip", "collate"]


@dataclass(frozen=True)
class Clip:
    """One clip: ``visual [T, dv]``, ``audio [T, da]``, gold events and two captions."""

    visual: np.ndarray
    audio: np.ndarray
    events: EventSet
    caption: str  # the reference caption rendered from the gold events
    web_caption: str  # the biased "web" caption


class AVWorld:
    """Clips of T steps with 2-5 events each (visual, audio or audiovisual).

    ``visual[t]`` is the sum of the fixed random codes (entity x action) of the visible events
    active at t, ``audio[t]`` the sum of the sound codes (source component + sound component,
    so sounds of one source share a direction) of the audible ones, each plus N(0, noise^2).
    Audio-only speech may come from "someone off-screen"; "music" has its own source.

    Args:
        seed: Seed of the clip sampler.
        code_seed: Seed of the fixed codes (the same world across sampler seeds).
        T: Steps per clip.
        dv: Visual feature size.
        da: Audio feature size.
        noise: Noise standard deviation.
        min_events: Fewest events per clip.
        max_events: Most events per clip.
        bias: The web-caption bias model.
        vocab: The grammar vocabulary.

    Raises:
        ValueError: On ``T < 4``, ``dv < 1``, ``da < 1``, a negative, NaN or infinite
            ``noise`` or ``not 1 <= min_events <= max_events``.
        TypeError: On a count that is not an int.
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        code_seed: int = 0,
        T: int = 16,
        dv: int = 32,
        da: int = 32,
        noise: float = 0.3,
        min_events: int = 2,
        max_events: int = 5,
        bias: WebBias | None = None,
        vocab: Vocabulary = DEFAULT_VOCAB,
    ) -> None:
        for name, value in (("T", T), ("dv", dv), ("da", da), ("min_events", min_events),
                            ("max_events", max_events)):  # fmt: skip
            check_int(name, value, low=0)
        if T < 4:
            raise ValueError(f"T must be >= 4, got {T}")
        check_int("dv", dv, low=1)
        check_int("da", da, low=1)
        check_real("noise", noise, 0.0)
        if not 1 <= min_events <= max_events:
            raise ValueError(f"need 1 <= min_events <= max_events, got {min_events}, "
                             f"{max_events}")  # fmt: skip
        self.T, self.dv, self.da, self.noise = T, dv, da, noise
        self.min_events, self.max_events = min_events, max_events
        self.bias, self.vocab = bias if bias is not None else WebBias(), vocab
        self.rng = np.random.default_rng(seed)
        codes = np.random.default_rng([code_seed, 7919])
        subjects, actions = vocab.subjects, vocab.actions
        self.vis_code = {(s, a): codes.normal(size=dv).astype(np.float32)
                         for s in vocab.entities for a in actions}  # fmt: skip
        src = {s: codes.normal(size=da) for s in subjects}
        snd = {a: codes.normal(size=da) for a in vocab.sounds}
        self.aud_code = {(s, a): ((src[s] + snd[a]) / np.sqrt(2)).astype(np.float32)
                         for s in subjects for a in vocab.sounds}  # fmt: skip

    def _event(self, rng: np.random.Generator) -> AtomicEvent:
        v = self.vocab
        mod = ("visual", "audio", "audiovisual")[rng.integers(3)]
        sounds = list(v.sounds)
        if mod == "visual":
            subj, act = v.entities[rng.integers(len(v.entities))], v.visual_actions[
                rng.integers(len(v.visual_actions))]  # fmt: skip
        else:
            visible = [a for a in sounds if v.sounds[a]]
            pool = sounds if mod == "audio" else visible
            act = pool[rng.integers(len(pool))]
            sources = list(v.sounds[act])
            if mod == "audio":
                sources = [MUSIC] if act == MUSIC else sources + ([OFFSCREEN] if act == "speak"
                                                                  else [])  # fmt: skip
            subj = sources[rng.integers(len(sources))]
        start = int(rng.integers(0, self.T - 1))
        end = min(self.T, start + int(rng.integers(2, 7)))
        return AtomicEvent(mod, subj, act, t_start=start, t_end=end)

    def _events(self, rng: np.random.Generator) -> EventSet:
        n = int(rng.integers(self.min_events, self.max_events + 1))
        evs: list[AtomicEvent] = []
        while len(evs) < n:
            e = self._event(rng)
            if all((e.subject, e.action) != (f.subject, f.action) for f in evs):
                evs.append(e)
        return EventSet(evs)

    def _streams(self, events: EventSet, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        vis = rng.normal(0, self.noise, (self.T, self.dv)).astype(np.float32)
        aud = rng.normal(0, self.noise, (self.T, self.da)).astype(np.float32)
        for e in events:
            s, t = (int(v) for v in e.interval())
            if e.modality in ("visual", "audiovisual"):
                vis[s:t] += self.vis_code[(e.subject, e.action)]
            if e.modality in ("audio", "audiovisual"):
                aud[s:t] += self.aud_code[(e.subject, e.action)]
        return vis, aud

    def sample(self, n: int) -> list[Clip]:
        """``n`` new clips (the sampler's state advances).

        Raises:
            TypeError: If ``n`` is not an int.
            ValueError: If ``n < 1``.
        """
        check_int("n", n, low=0)
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        out = []
        for _ in range(n):
            ev = self._events(self.rng)
            vis, aud = self._streams(ev, self.rng)
            web, _ = web_caption(ev, self.rng, self.bias)
            out.append(Clip(vis, aud, ev, render_caption(ev), web))
        return out


def collate(clips: Sequence[Clip]) -> dict[str, object]:
    """A batch: ``visual``/``audio`` tensors, ``gold_events``, ``reference``, ``web`` lists.

    Raises:
        ValueError: If ``clips`` is empty.
    """
    clips = list(clips)
    if not clips:
        raise ValueError("clips is empty: collate needs at least one clip")
    return {
        "visual": torch.from_numpy(np.stack([c.visual for c in clips])),
        "audio": torch.from_numpy(np.stack([c.audio for c in clips])),
        "gold_events": [c.events for c in clips],
        "reference": [c.caption for c in clips],
        "web": [c.web_caption for c in clips],
    }
