"""Question templates of ShapeTextVQA, their parser and the ground truth from the scene spec."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from eva_agent._vocab import COLOURS, SHAPES
from eva_agent.types import QAItem

_C = "|".join(COLOURS)
_S = "|".join(SHAPES)
TEMPLATES: dict[str, list[tuple[str, str]]] = {
    "attribute": [
        ("colour_of", f"^What colour is the (?P<shape>{_S})\\?$"),
        ("shape_of", f"^What shape is the (?P<color>{_C}) one\\?$"),
    ],
    "existence": [("exists", f"^Is there an? (?P<color>{_C}) (?P<shape>{_S})\\?$")],
    "count": [
        ("count_colour", f"^How many (?P<color>{_C}) shapes are there\\?$"),
        ("count_shape", f"^How many (?P<shape>{_S})s are there\\?$"),
        ("count_all", "^How many shapes are there\\?$"),
    ],
    "read": [("read", f"^What code is written under the (?P<color>{_C}) (?P<shape>{_S})\\?$")],
    "spatial": [
        (
            "left_of",
            f"^Which shape is nearest to the left of the (?P<color>{_C}) (?P<shape>{_S})\\?$",
        )
    ],
    "arithmetic": [("sum", f"^What is the sum of the numbers under the (?P<shape>{_S})s\\?$")],
}


def parse_question(question: str) -> dict[str, Any] | None:
    """``{"qtype", "form", "color", "shape"}`` for a ShapeTextVQA question, else None."""
    for qtype, forms in TEMPLATES.items():
        for form, pattern in forms:
            m = re.match(pattern, question.strip())
            if m:
                g = m.groupdict()
                return {
                    "qtype": qtype,
                    "form": form,
                    "color": g.get("color"),
                    "shape": g.get("shape"),
                }
    return None


def _find(scene: dict, color: str | None = None, shape: str | None = None) -> list[dict]:
    return [
        s
        for s in scene["shapes"]
        if (color is None or s["color"] == color) and (shape is None or s["shape"] == shape)
    ]


def label_number(label: str) -> int:
    """The number inside a code label (``"B42"`` -> 42)."""
    return int(re.sub(r"\D", "", label))


def answer_question(scene: dict[str, Any], parsed: dict[str, Any]) -> str | None:
    """Ground truth of a parsed question on a scene spec (None if it is ill-posed there)."""
    form, c, s = parsed["form"], parsed.get("color"), parsed.get("shape")
    if form == "colour_of":
        hits = _find(scene, shape=s)
        return hits[0]["color"] if len(hits) == 1 else None
    if form == "shape_of":
        hits = _find(scene, color=c)
        return hits[0]["shape"] if len(hits) == 1 else None
    if form == "exists":
        return "yes" if _find(scene, c, s) else "no"
    if form in ("count_colour", "count_shape", "count_all"):
        return str(len(_find(scene, c, s)))
    hits = _find(scene, c, s)
    if form == "read":
        return hits[0]["label"] if len(hits) == 1 else None
    if form == "left_of":
        if len(hits) != 1:
            return None
        t = hits[0]
        left = [x for x in scene["shapes"] if x["row"] == t["row"] and x["col"] < t["col"]]
        if not left:
            return None
        n = max(left, key=lambda x: x["col"])
        return f"{n['color']} {n['shape']}"
    if form == "sum":
        return str(sum(label_number(x["label"]) for x in hits)) if hits else None
    raise ValueError(f"unknown question form {form!r}")


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def make_questions(scene: dict[str, Any], image: Any, rng: np.random.Generator) -> list[QAItem]:
    """One question of each type about ``scene`` (fewer when a type is ill-posed there)."""
    shapes = scene["shapes"]
    kinds = [x["shape"] for x in shapes]
    cols = [x["color"] for x in shapes]
    out: list[QAItem] = []

    def add(qtype: str, q: str, target: dict | None = None) -> None:
        parsed = parse_question(q)
        assert parsed is not None, q  # templates above; not user input
        ans = answer_question(scene, parsed)
        if ans is not None:
            meta = {"scene_id": scene["id"], "form": parsed["form"], "n_shapes": len(shapes)}
            if target is not None:
                meta.update(font=target["font"], grey=target["grey"], target=target["label"])
            out.append(QAItem(image, q, ans, qtype, meta))

    single_kind = [k for k in SHAPES if kinds.count(k) == 1]
    single_col = [c for c in COLOURS if cols.count(c) == 1]
    if single_kind and (not single_col or rng.random() < 0.5):
        add("attribute", f"What colour is the {single_kind[int(rng.integers(len(single_kind)))]}?")
    elif single_col:
        add("attribute", f"What shape is the {single_col[int(rng.integers(len(single_col)))]} one?")
    if rng.random() < 0.5:
        t = shapes[int(rng.integers(len(shapes)))]
        c, s = t["color"], t["shape"]
    else:  # plausible absent: a colour and a shape that are both in the scene, never together
        pairs = [(c, s) for c in set(cols) for s in set(kinds) if not _find(scene, c, s)]
        pairs = sorted(pairs) or [(c, s) for c in COLOURS for s in SHAPES if not _find(scene, c, s)]
        c, s = pairs[int(rng.integers(len(pairs)))]
    add("existence", f"Is there {_article(c)} {c} {s}?")
    form = int(rng.integers(3))
    t = shapes[int(rng.integers(len(shapes)))]
    if form == 0:
        add("count", f"How many {t['color']} shapes are there?")
    elif form == 1:
        add("count", f"How many {t['shape']}s are there?")
    else:
        add("count", "How many shapes are there?")
    t = shapes[int(rng.integers(len(shapes)))]
    add("read", f"What code is written under the {t['color']} {t['shape']}?", t)
    lefts = [x for x in shapes if any(y["row"] == x["row"] and y["col"] < x["col"] for y in shapes)]
    if lefts:
        t = lefts[int(rng.integers(len(lefts)))]
        add("spatial", f"Which shape is nearest to the left of the {t['color']} {t['shape']}?")
    multi = sorted({k for k in kinds if kinds.count(k) >= 2}) or sorted(set(kinds))
    add(
        "arithmetic",
        f"What is the sum of the numbers under the {multi[int(rng.integers(len(multi)))]}s?",
    )
    return out
