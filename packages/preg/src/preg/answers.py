"""Answer extractors: turn a path's text into a hashable answer (or ``None``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from fractions import Fraction
from typing import Protocol, runtime_checkable

__all__ = [
    "AnswerExtractor",
    "BoxedExtractor",
    "LastNumberExtractor",
    "RegexExtractor",
    "normalize_numeric",
]

_NUM = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")


@runtime_checkable
class AnswerExtractor(Protocol):
    """Anything callable as ``extractor(text) -> Hashable | None``."""

    def __call__(self, text: str) -> Hashable | None:
        """Extract the answer from ``text``."""
        ...


def normalize_numeric(text: str) -> str | None:
    r"""Canonical form of a number written as text (``"1,000"`` -> ``"1000"``, ``"0.50"`` ->
    ``"1/2"``, ``"\\frac{1}{2}"`` -> ``"1/2"``); ``None`` when ``text`` is not a number.
    """  # noqa: D205
    s = text.strip().strip("$").replace(",", "").replace(" ", "")
    m = re.fullmatch(r"\\d?frac\{(-?[\d.]+)\}\{(-?[\d.]+)\}", s)
    if m:
        s = f"{m.group(1)}/{m.group(2)}"
    try:
        value = Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None
    return str(value)


class BoxedExtractor:
    r"""The content of the last ``\\boxed{...}`` (nested braces allowed), optionally normalised."""

    def __init__(self, normalize: bool = True) -> None:
        self.normalize = normalize

    def __call__(self, text: str) -> Hashable | None:
        """Extract the last boxed expression."""
        start = text.rfind("\\boxed{")
        if start < 0:
            return None
        i = start + len("\\boxed{")
        depth = 1
        j = i
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        if depth:
            return None
        content = text[i : j - 1].strip()
        if self.normalize:
            num = normalize_numeric(content)
            if num is not None:
                return num
        return content


class RegexExtractor:
    """First capture group (or whole match) of the last (or first) match of ``pattern``.

    Args:
        pattern: a regular expression.
        last: use the last match (default) rather than the first.
        cast: optional conversion of the matched string (``int``...); a failing cast gives None.
    """

    def __init__(
        self, pattern: str, last: bool = True, cast: Callable[[str], Hashable] | None = None
    ) -> None:
        try:
            self.pattern = re.compile(pattern)
        except re.error as exc:
            raise ValueError(
                f"pattern {pattern!r} is not a valid regular expression: {exc}"
            ) from exc
        self.last = last
        self.cast = cast

    def __call__(self, text: str) -> Hashable | None:
        """Extract the matched answer."""
        matches = list(self.pattern.finditer(text))
        if not matches:
            return None
        m = matches[-1] if self.last else matches[0]
        s = m.group(1) if m.groups() else m.group(0)
        if self.cast is None:
            return s
        try:
            return self.cast(s)
        except (ValueError, TypeError):
            return None


class LastNumberExtractor:
    """The last number in the text, normalised with :func:`normalize_numeric`."""

    def __call__(self, text: str) -> Hashable | None:
        """Extract the last number."""
        found = _NUM.findall(text)
        return normalize_numeric(found[-1]) if found else None
