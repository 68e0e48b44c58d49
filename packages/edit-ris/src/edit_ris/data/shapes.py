"""Procedural referring-expression scenes: 2-4 shapes on a noisy grey background.

A synthetic stand-in for RefCOCO. Every item carries the image, a referring expression that
picks out exactly one object (checked by :func:`resolve`), its ground-truth mask, an editing
instruction about the same referent and the rendered edited image (what an ideal instruction
editor returns; the tiny editor is trained on these triplets, never on masks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

SHAPES = ("circle", "square", "triangle")
COLOURS = {
    "red": (0.9, 0.15, 0.1),
    "green": (0.1, 0.75, 0.2),
    "blue": (0.15, 0.25, 0.9),
    "yellow": (0.95, 0.85, 0.1),
}
#: Edit colours: the source colours plus purple, which never occurs in a source scene.
EDIT_COLOURS = {**COLOURS, "purple": (0.6, 0.1, 0.75)}
SIZES = {"small": 3.2, "large": 5.6}  # half-extent in pixels at size 32 (scaled with size)
SPLITS = ("attr", "size", "spatial")


@dataclass(frozen=True)
class Obj:
    """One object of a scene: shape, colour, size class, centre (row, col) and half-extent."""

    shape: str
    colour: str
    size: str
    cy: float
    cx: float
    r: float


@dataclass
class ShapeRefItem:
    """One referring item.

    Attributes:
        image: float32 array (3, H, W) in [0, 1].
        expression: the referring expression, e.g. ``"the red circle"``.
        mask: bool array (H, W), the referent.
        edit_instruction: an instruction about the referent (``"make the red circle purple"``).
        edited_image: float32 array (3, H, W), the scene after that edit.
        target: index of the referent in ``objects``.
        objects: the scene's objects.
    """

    image: np.ndarray
    expression: str
    mask: np.ndarray
    edit_instruction: str
    edited_image: np.ndarray
    target: int
    objects: tuple[Obj, ...]


def _shape_mask(o: Obj, size: int) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64) + 0.5
    dy, dx = yy - o.cy, xx - o.cx
    if o.shape == "circle":
        return dy**2 + dx**2 <= o.r**2
    if o.shape == "square":
        s = o.r * 0.886  # same area as the circle
        return (np.abs(dy) <= s) & (np.abs(dx) <= s)
    # upward triangle inscribed in the circle's bounding box, slightly larger for equal area
    h = o.r * 1.25
    top, bottom = -h, h * 0.8
    inside_y = (dy >= top) & (dy <= bottom)
    half_w = (dy - top) / (bottom - top) * h * 1.1
    return inside_y & (np.abs(dx) <= half_w)


def render(
    objects: tuple[Obj, ...], size: int, noise: np.ndarray, colour_of: Any = None, skip: int = -1
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Render a scene: grey background + ``noise`` (3, H, W), objects painted in order."""
    img = np.full((3, size, size), 0.5) + noise
    masks = []
    for i, o in enumerate(objects):
        m = _shape_mask(o, size)
        masks.append(m)
        if i == skip:
            continue
        name = colour_of(i) if colour_of is not None else o.colour
        rgb = np.asarray(EDIT_COLOURS[name])[:, None]
        img[:, m] = rgb + noise[:, m] * 0.5
    return np.clip(img, 0.0, 1.0).astype(np.float32), masks


def resolve(objects: tuple[Obj, ...], desc: dict) -> list[int]:
    """Indices of the objects that match a structured description (the uniqueness check)."""
    idx = [
        i
        for i, o in enumerate(objects)
        if o.shape == desc["shape"]
        and desc.get("colour") in (None, o.colour)
        and desc.get("size") in (None, o.size)
    ]
    rel = desc.get("relation")
    if rel in ("leftmost", "rightmost", "topmost", "bottommost"):
        if len(idx) < 2:
            return []
        key = {
            "leftmost": lambda i: objects[i].cx,
            "rightmost": lambda i: -objects[i].cx,
            "topmost": lambda i: objects[i].cy,
            "bottommost": lambda i: -objects[i].cy,
        }[rel]
        vals = sorted(idx, key=key)
        if abs(key(vals[0]) - key(vals[1])) < 2.0:  # ambiguous: no clear extreme
            return []
        return [vals[0]]
    if rel in ("left of", "right of", "above", "below"):
        anchors = [i for i, o in enumerate(objects) if o.shape == desc["anchor"]]
        if len(anchors) != 1:
            return []
        a = objects[anchors[0]]
        test = {
            "left of": lambda o: o.cx < a.cx - 2.0,
            "right of": lambda o: o.cx > a.cx + 2.0,
            "above": lambda o: o.cy < a.cy - 2.0,
            "below": lambda o: o.cy > a.cy + 2.0,
        }[rel]
        return [i for i in idx if i != anchors[0] and test(objects[i])]
    return idx


def describe(desc: dict) -> str:
    """The text of a structured description (without the article)."""
    rel = desc.get("relation")
    if rel in ("leftmost", "rightmost", "topmost", "bottommost"):
        return f"{rel} {desc['shape']}"
    words = [w for w in (desc.get("size"), desc.get("colour"), desc["shape"]) if w]
    text = " ".join(words)
    if rel is not None:
        text += f" {rel} the {desc['anchor']}"
    return text


class ShapeRefGenerator:
    """Seeded generator of referring items on 32 x 32 (by default) procedural scenes.

    Splits: ``"attr"`` ("the red circle", "the circle" when the shape is unique), ``"size"``
    ("the small blue square" with a same-colour same-shape distractor of the other size),
    ``"spatial"`` ("the circle left of the square", "the leftmost triangle"). Every expression
    is unique to its referent (checked by :func:`resolve`).

    Args:
        size: Image side in pixels (>= 16).
        seed: Seed of the generator's own ``numpy.random.Generator``.
        noise: Standard deviation of the background noise (finite, >= 0).

    Raises:
        ValueError: For ``size < 16`` or a negative or non-finite ``noise``.

    Example:
        >>> item = ShapeRefGenerator(seed=0).sample(1, split="attr")[0]
        >>> item.image.shape, item.mask.dtype
        ((3, 32, 32), dtype('bool'))
    """

    def __init__(self, size: int = 32, seed: int = 0, noise: float = 0.04) -> None:
        if not isinstance(size, int) or size < 16:
            raise ValueError(f"size must be an int >= 16, got {size!r}")
        if isinstance(noise, bool) or not isinstance(noise, (int, float, np.number)):
            raise TypeError(f"noise must be a real number >= 0, got {noise!r}")
        if not np.isfinite(noise) or noise < 0:
            raise ValueError(f"noise must be a finite number >= 0, got {noise!r}")
        self.size = size
        self.rng = np.random.default_rng(seed)
        self.noise = float(noise)

    # -- scenes -----------------------------------------------------------------------------
    def _place(self, specs: list[tuple[str, str, str]]) -> tuple[Obj, ...] | None:
        scale = self.size / 32.0
        objs: list[Obj] = []
        for shape, colour, sz in specs:
            r = SIZES[sz] * scale
            for _ in range(50):
                cy, cx = self.rng.uniform(r + 1, self.size - r - 1, size=2)
                if all((cy - o.cy) ** 2 + (cx - o.cx) ** 2 > (r + o.r + 1.5) ** 2 for o in objs):
                    objs.append(Obj(shape, colour, sz, float(cy), float(cx), float(r)))
                    break
            else:
                return None
        return tuple(objs)

    def _random_specs(self, n: int) -> list[tuple[str, str, str]]:
        return [
            (
                str(self.rng.choice(SHAPES)),
                str(self.rng.choice(list(COLOURS))),
                str(self.rng.choice(list(SIZES))),
            )
            for _ in range(n)
        ]

    def _scene(self, split: str) -> tuple[tuple[Obj, ...], int, dict] | None:
        n = int(self.rng.integers(2, 5))
        specs = self._random_specs(n)
        if split == "size":  # plant a same-colour same-shape distractor of the other size
            shape, colour, sz = specs[0]
            specs[1] = (shape, colour, "small" if sz == "large" else "large")
        objs = self._place(specs)
        if objs is None:
            return None
        order = self.rng.permutation(len(objs))
        for t in order:
            o = objs[t]
            for desc in self._candidates(split, o, objs):
                if resolve(objs, desc) == [int(t)]:
                    return objs, int(t), desc
        return None

    def _candidates(self, split: str, o: Obj, objs: tuple[Obj, ...]) -> list[dict]:
        if split == "attr":
            return [{"shape": o.shape}, {"shape": o.shape, "colour": o.colour}]
        if split == "size":
            return [{"shape": o.shape, "colour": o.colour, "size": o.size}]
        rels = list(self.rng.permutation(["leftmost", "rightmost", "topmost", "bottommost"]))
        out = [{"shape": o.shape, "relation": r} for r in rels[:2]]
        anchors = [a.shape for a in objs if a.shape != o.shape]
        if anchors:
            anchor = str(self.rng.choice(anchors))
            for r in self.rng.permutation(["left of", "right of", "above", "below"])[:2]:
                out.append({"shape": o.shape, "relation": str(r), "anchor": anchor})
        return out

    def sample(self, n: int, split: str = "attr", edit: str = "recolour") -> list[ShapeRefItem]:
        """Draw ``n`` items of ``split``.

        Args:
            n: Number of items (>= 1).
            split: ``"attr"``, ``"size"`` or ``"spatial"``.
            edit: ``"recolour"`` (a random new colour, purple included), ``"purple"`` or
                ``"mixed"`` (recolour or remove, as in training).

        Raises:
            ValueError: For an unknown split or edit or ``n < 1``.
        """
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        if edit not in ("recolour", "purple", "mixed"):
            raise ValueError(f"edit must be 'recolour', 'purple' or 'mixed', got {edit!r}")
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a positive int, got {n!r}")
        items: list[ShapeRefItem] = []
        while len(items) < n:
            scene = self._scene(split)
            if scene is None:
                continue
            items.append(self._item(*scene, edit=edit))
        return items

    def _item(self, objs: tuple[Obj, ...], t: int, desc: dict, edit: str) -> ShapeRefItem:
        noise = self.rng.normal(0.0, self.noise, size=(3, self.size, self.size))
        image, masks = render(objs, self.size, noise)
        ref = describe(desc)
        if edit == "mixed" and self.rng.random() < 0.25:
            instruction = f"remove the {ref}"
            edited, _ = render(objs, self.size, noise, skip=t)
        else:
            if edit == "purple":
                new = "purple"
            else:
                new = str(self.rng.choice([c for c in EDIT_COLOURS if c != objs[t].colour]))
            instruction = f"make the {ref} {new}"
            edited, _ = render(
                objs, self.size, noise, colour_of=lambda i: new if i == t else objs[i].colour
            )
        return ShapeRefItem(image, f"the {ref}", masks[t], instruction, edited, t, objs)


def vocabulary() -> list[str]:
    """Every word the grammar and the instruction templates can produce."""
    words = {"the", "a", "an", "of", "make", "remove", "red", "paint", "segment", "to"}
    words |= set(SHAPES) | set(EDIT_COLOURS) | set(SIZES)
    words |= {"leftmost", "rightmost", "topmost", "bottommost", "left", "right", "above", "below"}
    return sorted(words)
