"""ShapeTextVQA: a deterministic, generated visual-QA set, balanced over the six types."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from eva_agent._vocab import QTYPES
from eva_agent.types import QAItem
from eva_agent.world.questions import make_questions
from eva_agent.world.scenes import render_scene, sample_scene
from methodkit import progress as progress_bar
from methodkit.checks import check_int, check_real

_SPLITS = {"train": 0, "val": 1, "test": 2}


class ShapeTextVQA(Sequence[QAItem]):
    """``n`` questions (``n / 6`` per type) on scenes generated from ``(seed, split)``.

    Scenes are drawn until every type has its share; each scene gives at most one question
    of each type, so a type that is ill-posed on a scene (no singleton for attribute, no left
    neighbour for spatial) is filled from later scenes.

    Args:
        n: Number of questions (>= 6).
        seed: Seed of the split.
        split: ``train``, ``val`` or ``test`` (independent streams).
        difficulty: Scene difficulty in [0, 1] (see :func:`~eva_agent.world.sample_scene`).
        progress: Bar over the rendered scenes (about 3 ms a question, so it matters from a
            few thousand questions): ``None`` on a terminal only, ``True`` always, ``False``
            never (``TQDM_DISABLE=1`` silences it).

    Raises:
        ValueError: If ``n < 6``, ``seed < 0``, ``difficulty`` is outside [0, 1] (NaN
            included) or ``split`` is unknown.
        TypeError: If ``n`` or ``seed`` is not an int.

    Example:
        >>> ds = ShapeTextVQA(12, seed=0, split="test")
        >>> len(ds), sorted({it.qtype for it in ds}) == sorted(QTYPES)
        (12, True)
    """

    def __init__(
        self,
        n: int,
        seed: int = 0,
        split: str = "test",
        difficulty: float = 0.5,
        progress: bool | None = None,
    ) -> None:
        check_int("n", n, low=len(QTYPES))
        if split not in _SPLITS:
            raise ValueError(f"split must be one of {sorted(_SPLITS)}, got {split!r}")
        self.n, self.seed, self.split = n, check_int("seed", seed, low=0), split
        self.difficulty = check_real("difficulty", difficulty, 0.0, 1.0)
        rng = np.random.default_rng([int(seed), _SPLITS[split], 7031])
        quota = {t: n // len(QTYPES) + (i < n % len(QTYPES)) for i, t in enumerate(QTYPES)}
        by_type: dict[str, list[QAItem]] = {t: [] for t in QTYPES}
        self.scenes: list[dict] = []
        bar = progress_bar(itertools.count(), progress, desc="ShapeTextVQA scenes")
        for k in bar:
            if not any(len(by_type[t]) < quota[t] for t in QTYPES):
                break
            spec = sample_scene(rng, self.difficulty, scene_id=f"{split}-{seed}-{k}")
            image = render_scene(spec)
            used = False
            for item in make_questions(spec, image, rng):
                if len(by_type[item.qtype]) < quota[item.qtype]:
                    by_type[item.qtype].append(item)
                    used = True
            if used:
                self.scenes.append(spec)
        if hasattr(bar, "close"):
            bar.close()
        # interleave the types so that any prefix is balanced
        self.items = [
            it
            for group in zip(*(by_type[t] for t in QTYPES if by_type[t]), strict=False)
            for it in group
        ]
        for t in QTYPES:
            extra = by_type[t][min(len(v) for v in by_type.values() if v) :]
            self.items.extend(extra)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> QAItem:  # type: ignore[override]
        return self.items[i]

    def __iter__(self) -> Iterator[QAItem]:
        return iter(self.items)
