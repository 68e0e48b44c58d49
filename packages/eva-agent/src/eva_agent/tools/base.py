"""The tool protocol: ``name``, ``kind``, a JSON ``schema`` and ``__call__(image, **args)``."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from eva_agent.types import Observation


@runtime_checkable
class Tool(Protocol):
    """A tool the agent can call.

    Attributes:
        name: Unique name the VLM uses in a tool call.
        kind: ``ocr``, ``detect``, ``zoom`` or ``calc`` (what evidence it yields).
        schema: JSON schema of its arguments (shown to real VLMs).
    """

    name: str
    kind: str
    schema: dict[str, Any]

    def __call__(self, image: Any, **args: Any) -> Observation:
        """Run on ``image`` (PIL RGB) and return an :class:`~eva_agent.types.Observation`."""
        ...


REGION_SCHEMA = {
    "type": "array",
    "items": {"type": "number"},
    "minItems": 4,
    "maxItems": 4,
    "description": "x0, y0, x1, y1 in image pixels; omitted = whole image",
}


def bad_args(tool: str, args: dict[str, Any], allowed: set[str]) -> Observation | None:
    """An ``error`` observation naming unknown arguments, or None when all are known."""
    extra = sorted(set(args) - allowed)
    if extra:
        return Observation(
            "error", [], f"{tool} got unknown argument(s) {extra}; allowed: {sorted(allowed)}"
        )
    return None
