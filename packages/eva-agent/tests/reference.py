"""Slow, obviously correct references the package is tested against."""

from __future__ import annotations

import re
from functools import cache


def truth_reference(scene: dict, question: str) -> str | None:
    """Ground truth of a ShapeTextVQA question from the scene spec, written independently of
    ``eva_agent.world.questions`` (plain string handling, loops only)."""
    q = question.rstrip("?").split()
    shapes = scene["shapes"]

    def pick(colour=None, kind=None):
        res = []
        for s in shapes:
            if colour is not None and s["color"] != colour:
                continue
            if kind is not None and s["shape"] != kind:
                continue
            res.append(s)
        return res

    if question.startswith("What colour is the "):
        hits = pick(kind=q[-1])
        return hits[0]["color"] if len(hits) == 1 else None
    if question.startswith("What shape is the "):
        hits = pick(colour=q[-2])
        return hits[0]["shape"] if len(hits) == 1 else None
    if question.startswith("Is there "):
        return "yes" if pick(q[-2], q[-1]) else "no"
    if question == "How many shapes are there?":
        return str(len(shapes))
    if question.startswith("How many ") and q[3] == "shapes":
        return str(len(pick(colour=q[2])))
    if question.startswith("How many "):
        return str(len(pick(kind=q[2][:-1])))
    if question.startswith("What code is written under the "):
        hits = pick(q[-2], q[-1])
        return hits[0]["label"] if len(hits) == 1 else None
    if question.startswith("Which shape is nearest to the left of the "):
        t = pick(q[-2], q[-1])[0]
        best = None
        for s in shapes:
            left = s["row"] == t["row"] and s["col"] < t["col"]
            if left and (best is None or s["col"] > best["col"]):
                best = s
        return None if best is None else best["color"] + " " + best["shape"]
    if question.startswith("What is the sum of the numbers under the "):
        total = 0
        for s in pick(kind=q[-1][:-1]):
            total += int("".join(ch for ch in s["label"] if ch.isdigit()))
        return str(total)
    raise ValueError(question)


def edit_distance_reference(a: str, b: str) -> int:
    """Levenshtein distance by plain recursion with memoisation."""

    @cache
    def d(i: int, j: int) -> int:
        if i == 0 or j == 0:
            return i + j
        return min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] != b[j - 1]))

    return d(len(a), len(b))


def normalise_reference(text: str) -> str:
    """Case, spaces and punctuation off; O/Q -> 0, I/L/| -> 1 (character by character)."""
    out = []
    for ch in text:
        if not (ch.isalnum() or ch == "|"):
            continue
        c = ch.upper()
        out.append({"O": "0", "Q": "0", "I": "1", "L": "1", "|": "1"}.get(c, c))
    return "".join(out)


def boxes_overlap(a, b) -> bool:
    return not (a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1])


def digits_sum_reference(texts: list[str]) -> int:
    return sum(int(re.sub(r"\D", "", t)) for t in texts)
