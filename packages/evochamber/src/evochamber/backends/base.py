"""The ChatModel protocol and ScriptedChatModel, a deterministic test double."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

Message = dict[str, str]


@dataclass
class ChatResult:
    """One completion: its text and token counts."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@runtime_checkable
class ChatModel(Protocol):
    """``chat(messages, *, n, temperature, max_tokens, stop, seed) -> list[ChatResult]``."""

    def chat(
        self,
        messages: Sequence[Message],
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> list[ChatResult]:
        """Reply to ``messages`` with ``n`` completions."""


def check_choices(results: Sequence[ChatResult], backend: str) -> list[ChatResult]:
    """Raise ValueError when a back-end returned zero choices."""
    if not results:
        raise ValueError(f"{backend} returned zero choices")
    return list(results)


class ScriptedChatModel:
    """Replies from a script; records every call (for tests and offline demos).

    Args:
        replies: A list of texts used in turn (cycled), or ``fn(messages) -> str``.
    """

    def __init__(self, replies: Sequence[str] | Callable[[Sequence[Message]], str]) -> None:
        self.replies = replies
        self.calls: list[dict[str, Any]] = []

    def chat(
        self,
        messages: Sequence[Message],
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> list[ChatResult]:
        """Reply to ``messages`` with ``n`` completions."""
        self.calls.append({"messages": [dict(m) for m in messages], "n": n})
        out = []
        for _ in range(n):
            if callable(self.replies):
                text = self.replies(messages)
            else:
                if not self.replies:
                    return check_choices([], "ScriptedChatModel")
                text = self.replies[(len(self.calls) - 1) % len(self.replies)]
            prompt = sum(len(m["content"].split()) for m in messages)
            out.append(ChatResult(text, prompt, len(text.split())))
        return check_choices(out, "ScriptedChatModel")
