"""OpenAIChatModel: any OpenAI-compatible ``/v1/chat/completions`` endpoint.

A thin adapter over :class:`methodkit.llm.OpenAIClient` (standard library ``urllib``, retries
with exponential backoff on 429 / 5xx / timeouts, errors naming the URL and status). Works with
vLLM, the llama.cpp server and Ollama.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evochamber.backends.base import ChatResult, Message, check_choices
from methodkit.llm import OpenAIClient


class OpenAIChatModel(OpenAIClient):
    """Chat completions over HTTP (a :class:`~evochamber.backends.ChatModel`).

    Args:
        base_url: E.g. ``"http://localhost:8000/v1"``.
        model: The served model's name.
        api_key: Sent as a bearer token when given.
        timeout: Seconds per request.
        max_retries: Retries on 429 / 5xx / timeouts / refused connections, with exponential
            backoff (``Retry-After`` honoured).
        backoff: First wait in seconds (doubles each retry).

    Raises:
        ValueError: On a bad ``base_url``, ``timeout`` or ``max_retries``.
        methodkit.llm.LLMHTTPError: (a ``RuntimeError``) when the server answers an error.
        methodkit.llm.LLMTimeoutError: (a ``TimeoutError``) when it does not answer in time.
        methodkit.llm.LLMConnectionError: (a ``ConnectionError``) when it cannot be reached.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
    ) -> None:
        super().__init__(
            base_url,
            model,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
        )

    def payload(
        self, messages: Sequence[Message], n: int, temperature: float, max_tokens: int,
        stop: Sequence[str] | None, seed: int | None,
    ) -> dict[str, Any]:  # fmt: skip
        """The JSON body sent to the endpoint."""
        return self.chat_body(
            messages, n=n, temperature=temperature, max_tokens=max_tokens, stop=stop, seed=seed
        )

    def chat(  # type: ignore[override]
        self,
        messages: Sequence[Message],
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        **extra: Any,
    ) -> list[ChatResult]:
        """Reply to ``messages`` with ``n`` completions (``extra``: e.g. ``logprobs=True``)."""
        results = super().chat(
            messages,
            n=n,
            temperature=temperature,
            max_tokens=max_tokens,
            stop=stop,
            seed=seed,
            **extra,
        )
        return check_choices(results, f"OpenAIChatModel({self.url('/chat/completions')})")
