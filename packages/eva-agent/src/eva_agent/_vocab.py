"""The visual vocabulary shared by the detector, the assessor, the verifier and the world."""

from __future__ import annotations

import re

#: Flat colours of the synthetic scenes (RGB) and the names the detector reports.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "orange": (245, 140, 20),
    "yellow": (235, 210, 25),
    "green": (40, 165, 60),
    "blue": (40, 80, 220),
    "purple": (150, 50, 190),
}
SHAPES: tuple[str, ...] = ("square", "circle", "triangle", "star")
#: Question types (the spec's six).
QTYPES: tuple[str, ...] = ("attribute", "existence", "count", "read", "spatial", "arithmetic")

_WORD = re.compile(r"[a-z]+")


def entities(question: str) -> tuple[set[str], set[str]]:
    """Colour and shape words named in ``question`` (plurals folded to the singular)."""
    words = {
        w.rstrip("s") if w.endswith("s") and w[:-1] in SHAPES else w
        for w in _WORD.findall(question.lower())
    }
    return {c for c in COLOURS if c in words}, {s for s in SHAPES if s in words}


def infer_qtype(question: str) -> str:
    """Question type from keywords (used when the caller gives no ``qtype``)."""
    q = question.lower()
    if "sum" in q or "total of" in q or "add up" in q:
        return "arithmetic"
    if "how many" in q:
        return "count"
    if "left of" in q or "right of" in q or "above" in q or "below the" in q:
        return "spatial"
    if "code" in q or "written" in q or "text" in q or "label" in q:
        return "read"
    if q.startswith(("is there", "are there", "does the image")):
        return "existence"
    return "attribute"
