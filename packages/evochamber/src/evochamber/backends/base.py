"""The ChatModel protocol and ScriptedChatModel, a deterministic test double."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from methodkit.llm import ChatReply, check_chat_args

Message = dict[str, str]

#: One completion: ``text``, ``prompt_tokens``, ``completion_tokens`` (and, from HTTP
#: back-ends, ``finish_reason`` and ``logprobs``): the core's :class:`methodkit.llm.ChatReply`.
ChatResult = ChatReply


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
        """Reply to ``messages`` with ``n`` completions (``stop`` cuts each reply)."""
        check_chat_args(
            messages, n=n, temperature=temperature, max_tokens=max_tokens, stop=stop, seed=seed
        )
        self.calls.append({"messages": [dict(m) for m in messages], "n": n})
        out = []
        for _ in range(n):
            if callable(self.replies):
                text = self.replies(messages)
            else:
                if not self.replies:
                    return check_choices([], "ScriptedChatModel")
                text = self.replies[(len(self.calls) - 1) % len(self.replies)]
            for s in stop or ():
                text = text.split(s)[0]
            words = text.split()[:max_tokens]  # one "token" per word
            text = " ".join(words) if len(words) < len(text.split()) else text
            prompt = sum(len(str(m["content"]).split()) for m in messages)
            out.append(ChatResult(text, prompt, len(words)))
        return check_choices(out, "ScriptedChatModel")
