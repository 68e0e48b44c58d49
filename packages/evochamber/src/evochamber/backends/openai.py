"""OpenAIChatModel: any OpenAI-compatible ``/v1/chat/completions`` endpoint.

A thin adapter over :class:`methodkit.llm.OpenAIClient` (standard library ``urllib``, retries
with exponential backoff on 429 / 5xx / timeouts, errors naming the URL and status). Works with
vLLM, the llama.cpp server and Ollama.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
        prefill_extra: Body fields sent when the last message is an ``assistant`` prefix the
            reply must continue (a small model's forced ``Answer:``). vLLM needs
            ``{"continue_final_message": True, "add_generation_prompt": False}``; the llama.cpp
            server and Ollama continue a final assistant message without extra fields. A
            server that answers afresh instead is still read by the tolerant parsers.

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
        prefill_extra: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            base_url,
            model,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
        )
        if prefill_extra is not None and not isinstance(prefill_extra, Mapping):
            raise TypeError(f"prefill_extra must be a mapping or None, got {prefill_extra!r}")
        self.prefill_extra = dict(prefill_extra or {})

    def payload(
        self, messages: Sequence[Message], n: int, temperature: float, max_tokens: int,
        stop: Sequence[str] | None, seed: int | None,
    ) -> dict[str, Any]:  # fmt: skip
        """The JSON body sent to the endpoint."""
        extra = self.prefill_extra if messages and messages[-1].get("role") == "assistant" else {}
        return self.chat_body(
            messages, n=n, temperature=temperature, max_tokens=max_tokens, stop=stop, seed=seed,
            **extra,
        )  # fmt: skip

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
        """Reply to ``messages`` with ``n`` completions (``extra``: e.g. ``logprobs=True``).

        A final ``assistant`` message is a forced prefix (``prefill_extra`` is added).
        """
        if messages and messages[-1].get("role") == "assistant":
            extra = {**self.prefill_extra, **extra}
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
