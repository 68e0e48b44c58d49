"""OpenAIChatModel: any OpenAI-compatible ``/v1/chat/completions`` endpoint.

Works with vLLM, the llama.cpp server and Ollama; runs over the standard library's ``urllib``
(no HTTP dependency) with retries and exponential backoff.
"""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from evochamber.backends.base import ChatResult, Message, check_choices

RETRY_STATUS = {429, 500, 502, 503, 504}


class OpenAIChatModel:
    """Chat completions over HTTP.

    Args:
        base_url: E.g. ``"http://localhost:8000/v1"``.
        model: The served model's name.
        api_key: Sent as a bearer token when given.
        timeout: Seconds per request.
        max_retries: Retries on 429 / 5xx / connection errors, with exponential backoff.
        backoff: First wait in seconds (doubles each retry).

    Raises:
        ValueError: On a bad ``timeout`` or ``max_retries``.
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
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0, got {timeout!r}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries!r}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model, self.api_key = model, api_key
        self.timeout, self.max_retries, self.backoff = float(timeout), int(max_retries), backoff

    def payload(
        self, messages: Sequence[Message], n: int, temperature: float, max_tokens: int,
        stop: Sequence[str] | None, seed: int | None,
    ) -> dict[str, Any]:  # fmt: skip
        """The JSON body sent to the endpoint."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "n": n,
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        if stop:
            body["stop"] = list(stop)
        if seed is not None:
            body["seed"] = seed
        return body

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode()
        for attempt in range(self.max_retries + 1):
            req = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read().decode())
            except urllib.error.HTTPError as exc:
                if exc.code not in RETRY_STATUS or attempt == self.max_retries:
                    raise RuntimeError(
                        f"{self.url} answered HTTP {exc.code} after {attempt + 1} attempt(s)"
                    ) from exc
            except TimeoutError as exc:
                if attempt == self.max_retries:
                    raise TimeoutError(
                        f"{self.url} did not answer within {self.timeout} s "
                        f"({attempt + 1} attempt(s))"
                    ) from exc
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, (TimeoutError, socket.timeout)):
                    if attempt == self.max_retries:
                        raise TimeoutError(
                            f"{self.url} did not answer within {self.timeout} s"
                        ) from exc
                elif attempt == self.max_retries:
                    raise ConnectionError(f"cannot reach {self.url}: {exc.reason}") from exc
            time.sleep(self.backoff * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

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
        reply = self._post(self.payload(messages, n, temperature, max_tokens, stop, seed))
        usage = reply.get("usage") or {}
        choices = reply.get("choices") or []
        results = [
            ChatResult(
                (c.get("message") or {}).get("content") or "",
                int(usage.get("prompt_tokens", 0)),
                int(usage.get("completion_tokens", 0)) // max(1, len(choices)),
            )
            for c in choices
        ]
        return check_choices(results, f"OpenAIChatModel({self.url})")
