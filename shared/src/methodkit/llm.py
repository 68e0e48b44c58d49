"""One OpenAI-compatible HTTP client for every package that talks to a chat model.

Standard library only (``urllib``), so it costs nothing to import; ``import methodkit`` does not
load it. It serves vLLM, the llama.cpp server, Ollama and hosted APIs:

- :class:`OpenAIClient`: ``POST {base_url}{route}`` with a bearer token, a per-request timeout
  and retries with exponential backoff on 429 / 5xx / timeouts / refused connections
  (``Retry-After`` honoured, capped by ``max_backoff``); :meth:`OpenAIClient.chat` wraps
  ``/chat/completions`` (``logprobs`` / ``top_logprobs`` when asked) into :class:`ChatReply`.
- One set of errors, each naming the URL (and the HTTP status where there is one):
  :class:`LLMConnectionError` (also a ``ConnectionError``), :class:`LLMTimeoutError` (also a
  ``TimeoutError``), :class:`LLMHTTPError` and :class:`LLMResponseError` (also a ``ValueError``),
  all :class:`LLMError` (a ``RuntimeError``).
- :func:`check_chat_args`: the boundary checks every chat back-end applies to its arguments
  (the contract in :mod:`methodkit.testing` tests them).

Users: eva-agent (``OpenAIVLM``), evochamber (``OpenAIChatModel``) and preg
(``OpenAICompatGenerator``) are thin adapters over this client.

Example:
    >>> from methodkit.llm import OpenAIClient
    >>> client = OpenAIClient("http://localhost:8000/v1", "my-model", timeout=30)
    >>> client.chat([{"role": "user", "content": "Hi"}])  # doctest: +SKIP
    [ChatReply(text='Hello!', prompt_tokens=9, completion_tokens=3, ...)]
"""

from __future__ import annotations

import email.utils
import http.client
import json
import math
import re
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "RETRY_STATUS",
    "ROLES",
    "ChatBackend",
    "ChatReply",
    "LLMConnectionError",
    "LLMError",
    "LLMHTTPError",
    "LLMResponseError",
    "LLMTimeoutError",
    "OpenAIClient",
    "TokenLogprob",
    "check_chat_args",
    "first_line",
    "parse_chat_choice",
    "parse_choice",
]

#: HTTP statuses retried with backoff: rate limiting and transient server errors.
RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
#: Message roles a chat back-end accepts.
ROLES = ("system", "user", "assistant", "tool")


class LLMError(RuntimeError):
    """Base of the client's errors; ``url`` is the endpoint that failed."""

    def __init__(self, message: str, url: str) -> None:
        super().__init__(message)
        self.url = url


class LLMConnectionError(LLMError, ConnectionError):
    """The server could not be reached (refused, reset, DNS) after every retry."""


class LLMTimeoutError(LLMConnectionError, TimeoutError):
    """The server did not answer within ``timeout`` seconds, after every retry."""


class LLMHTTPError(LLMError):
    """The server answered an HTTP error status (after every retry for a retryable one).

    Attributes:
        status: The HTTP status code.
        body: The first 300 characters of the response body.
    """

    def __init__(self, message: str, url: str, status: int, body: str = "") -> None:
        super().__init__(message, url)
        self.status, self.body = int(status), body


class LLMResponseError(LLMError, ValueError):
    """The server answered 200 with a body that is not the expected JSON."""


@dataclass
class TokenLogprob:
    """One generated token, its log-probability and the top alternatives (token -> logprob)."""

    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)


@dataclass
class ChatReply:
    """One completion of a chat back-end.

    Attributes:
        text: The reply's text.
        prompt_tokens: Tokens of the prompt (0 when the back-end does not say).
        completion_tokens: Tokens generated for this reply.
        finish_reason: ``"stop"``, ``"length"``, ... (None when unknown).
        logprobs: Per-token log-probabilities when they were asked for and returned.
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    logprobs: list[TokenLogprob] | None = None


@runtime_checkable
class ChatBackend(Protocol):
    """``chat(messages, *, n, temperature, max_tokens, stop, seed) -> list[ChatReply]``.

    Replies may be any objects with ``text``, ``prompt_tokens`` and ``completion_tokens``.
    """

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> list[Any]:
        """Reply to ``messages`` with ``n`` completions."""
        ...


def _check_message(k: int, m: Any) -> dict[str, Any]:
    if not isinstance(m, Mapping):
        raise TypeError(f"messages[{k}] must be a mapping with role and content, got {m!r}")
    if m.get("role") not in ROLES:
        raise ValueError(f"messages[{k}]['role'] must be one of {ROLES}, got {m.get('role')!r}")
    content = m.get("content")
    if not isinstance(content, str | list):
        raise TypeError(
            f"messages[{k}]['content'] must be a str (or a list of content parts), "
            f"got {type(content).__name__}"
        )
    return dict(m)


def check_chat_args(
    messages: Any,
    *,
    n: int = 1,
    temperature: float = 0.0,
    max_tokens: int = 256,
    stop: Sequence[str] | None = None,
    seed: int | None = None,
) -> list[dict[str, Any]]:
    """Validate a chat call's arguments; return the messages as plain dicts.

    Raises:
        TypeError: If ``messages`` is not a sequence of mappings, a content is neither a str
            nor a list of parts, ``stop`` is a bare string or holds a non-string, or ``n`` /
            ``max_tokens`` / ``seed`` is not an int.
        ValueError: If ``messages`` is empty, a role is unknown, ``n`` or ``max_tokens`` is
            below 1, or ``temperature`` is negative or not finite.
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise TypeError(f"messages must be a list of {{role, content}} dicts, got {messages!r}")
    if not messages:
        raise ValueError("messages must hold at least one message, got []")
    out = [_check_message(k, m) for k, m in enumerate(messages)]
    for name, value in (("n", n), ("max_tokens", max_tokens)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if not isinstance(temperature, int | float) or not math.isfinite(temperature):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if stop is not None and (
        isinstance(stop, str) or not all(isinstance(s, str) and s for s in stop)
    ):
        raise TypeError(f"stop must be a list of non-empty strings, got {stop!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"seed must be an int or None, got {seed!r}")
    return out


def first_line(text: str, *, marker: str | None = None) -> str:
    """The answer line of a small model's reply: tolerant, never raises.

    With ``marker`` (e.g. ``"Answer:"``), the text after its last occurrence (case-insensitive,
    ``=`` accepted for ``:``) when there is one; otherwise the first non-empty line. Quotes,
    a trailing full stop and surrounding whitespace are stripped.
    """
    text = text or ""
    if marker:
        word = re.escape(marker.rstrip(":= ").strip())
        hits = re.findall(rf"{word}\s*[:=]\s*([^\n]*)", text, flags=re.IGNORECASE)
        hits = [h for h in hits if h.strip()]
        if hits:
            text = hits[-1]
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    quotes = " \t\"'`*"
    return line.strip(quotes).rstrip(".").strip(quotes)


def parse_choice(text: str, options: Sequence[str]) -> str | None:
    """The option a free-text reply names, or None: tolerant matching for small models.

    An exact match (case-insensitive, after :func:`first_line`) wins; otherwise the option
    whose whole-word mention comes first in the reply (ties: the longer option).

    Raises:
        ValueError: If ``options`` is empty or holds an empty string.
    """
    if not options or any(not isinstance(o, str) or not o.strip() for o in options):
        raise ValueError(f"options must be non-empty strings, got {options!r}")
    line = first_line(text).lower()
    for o in options:
        if line == o.lower():
            return o
    best: tuple[int, int, str] | None = None
    for o in options:
        m = re.search(rf"(?<!\w){re.escape(o.lower())}(?!\w)", (text or "").lower())
        if m and (best is None or (m.start(), -len(o)) < best[:2]):
            best = (m.start(), -len(o), o)
    return None if best is None else best[2]


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), else None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _is_timeout(exc: BaseException) -> bool:
    reason = getattr(exc, "reason", exc)
    return isinstance(reason, TimeoutError | socket.timeout)


def _logprobs(choice: Mapping[str, Any]) -> list[TokenLogprob] | None:
    content = (choice.get("logprobs") or {}).get("content")
    if not content:
        return None
    return [
        TokenLogprob(
            str(t.get("token", "")),
            float(t["logprob"]),
            {str(a.get("token", "")): float(a["logprob"]) for a in t.get("top_logprobs") or []},
        )
        for t in content
        if isinstance(t, Mapping) and "logprob" in t
    ]


def parse_chat_choice(
    choice: Mapping[str, Any], usage: Mapping[str, Any], n_choices: int
) -> ChatReply:
    """One ``choices[i]`` of a ``/chat/completions`` body as a :class:`ChatReply`."""
    message = choice.get("message") or {}
    return ChatReply(
        text=message.get("content") or "",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0) // max(1, n_choices),
        finish_reason=choice.get("finish_reason"),
        logprobs=_logprobs(choice),
    )


class OpenAIClient:
    """Requests to an OpenAI-compatible server, with retries and typed errors.

    Args:
        base_url: E.g. ``"http://localhost:8000/v1"`` (``http`` or ``https``).
        model: The served model's name, sent in every body.
        api_key: Sent as ``Authorization: Bearer <api_key>`` when given.
        timeout: Seconds per request (connect and read).
        max_retries: Retries after the first attempt on a retryable status, a timeout or a
            refused/reset connection.
        backoff: First wait in seconds; it doubles each retry (``backoff * 2**attempt``).
        max_backoff: Cap on any one wait, including a server's ``Retry-After``.
        retry_status: HTTP statuses retried (default :data:`RETRY_STATUS`).

    Raises:
        ValueError: On a base_url that is not http(s), or a timeout, max_retries, backoff or
            max_backoff out of range.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        retry_status: Collection[int] = RETRY_STATUS,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if not isinstance(timeout, int | float) or not timeout > 0 or not math.isfinite(timeout):
            raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
        for name, value in (("backoff", backoff), ("max_backoff", max_backoff)):
            if not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
        self.base_url, self.model, self.api_key = base_url.rstrip("/"), model, api_key
        self.timeout, self.max_retries = float(timeout), max_retries
        self.backoff, self.max_backoff = float(backoff), float(max_backoff)
        self.retry_status = frozenset(retry_status)
        self.n_requests = 0  # HTTP attempts, retries included

    def url(self, route: str) -> str:
        """The full URL of ``route`` (e.g. ``"/chat/completions"``)."""
        return f"{self.base_url}/{route.lstrip('/')}"

    def _wait(self, attempt: int, retry_after: float | None = None) -> None:
        delay = self.backoff * 2**attempt if retry_after is None else retry_after
        time.sleep(min(delay, self.max_backoff))

    def _attempt(self, url: str, data: bytes, headers: dict[str, str]) -> bytes:
        req = urllib.request.Request(url, data=data, headers=headers, method="POST")
        self.n_requests += 1
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            return resp.read()

    def post(self, route: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        """POST ``payload`` as JSON to ``route``; the decoded JSON object of the answer.

        Raises:
            LLMHTTPError: On a non-retryable status, or a retryable one after every retry.
            LLMTimeoutError: When every attempt timed out.
            LLMConnectionError: When the server cannot be reached after every retry.
            LLMResponseError: When the body is not a JSON object.
        """
        url = self.url(route)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(dict(payload)).encode()
        tries = self.max_retries + 1
        for attempt in range(tries):
            last = attempt == tries - 1
            try:
                raw = self._attempt(url, data, headers)
            except urllib.error.HTTPError as exc:
                body = exc.read().decode(errors="replace")[:300]
                if exc.code not in self.retry_status or last:
                    raise LLMHTTPError(
                        f"{url} answered HTTP {exc.code} after {attempt + 1} attempt(s): {body}",
                        url,
                        exc.code,
                        body,
                    ) from None
                self._wait(attempt, _retry_after(exc.headers.get("Retry-After")))
                continue
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
                if last and _is_timeout(exc):
                    raise LLMTimeoutError(
                        f"{url} did not answer within {self.timeout:g} s "
                        f"({attempt + 1} attempt(s))",
                        url,
                    ) from None
                if last:
                    reason = getattr(exc, "reason", exc)
                    raise LLMConnectionError(
                        f"cannot reach {url} after {attempt + 1} attempt(s): {reason}", url
                    ) from None
                self._wait(attempt)
                continue
            return self._decode(raw, url)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _decode(raw: bytes, url: str) -> dict[str, Any]:
        try:
            out = json.loads(raw.decode("utf-8", errors="replace"))
        except json.JSONDecodeError as exc:
            raise LLMResponseError(
                f"{url} answered malformed JSON ({exc.msg} at {exc.pos}): {raw[:120]!r}", url
            ) from None
        if not isinstance(out, dict):
            raise LLMResponseError(f"{url} answered {type(out).__name__}, not an object", url)
        return out

    def chat_body(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        logprobs: bool = False,
        top_logprobs: int | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """The JSON body of a ``/chat/completions`` request (arguments checked)."""
        msgs = check_chat_args(
            messages, n=n, temperature=temperature, max_tokens=max_tokens, stop=stop, seed=seed
        )
        body: dict[str, Any] = {
            "model": self.model,
            "messages": msgs,
            "n": n,
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        if stop:
            body["stop"] = list(stop)
        if seed is not None:
            body["seed"] = seed
        if logprobs or top_logprobs:
            body["logprobs"] = True
        if top_logprobs:
            if isinstance(top_logprobs, bool) or not isinstance(top_logprobs, int):
                raise TypeError(f"top_logprobs must be an int, got {top_logprobs!r}")
            if not 1 <= top_logprobs <= 20:
                raise ValueError(f"top_logprobs must be in 1..20, got {top_logprobs}")
            body["top_logprobs"] = top_logprobs
        return {**body, **extra}

    def chat_raw(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> dict[str, Any]:
        """The decoded body of ``/chat/completions`` (``kwargs`` as in :meth:`chat_body`).

        Raises:
            LLMResponseError: If the answer has no ``choices`` list; otherwise as :meth:`post`.
        """
        out = self.post("/chat/completions", self.chat_body(messages, **kwargs))
        if not isinstance(out.get("choices"), list) or not out["choices"]:
            raise LLMResponseError(
                f"{self.url('/chat/completions')} answered no choices: {str(out)[:200]}",
                self.url("/chat/completions"),
            )
        return out

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        logprobs: bool = False,
        top_logprobs: int | None = None,
        **extra: Any,
    ) -> list[ChatReply]:
        """Reply to ``messages`` with ``n`` completions (a :class:`ChatBackend`).

        ``logprobs=True`` asks for per-token log-probabilities, ``top_logprobs=k`` also for the
        ``k`` best alternatives per token; ``extra`` goes into the body as is (e.g. ``tools``).
        """
        out = self.chat_raw(
            messages,
            n=n,
            temperature=temperature,
            max_tokens=max_tokens,
            stop=stop,
            seed=seed,
            logprobs=logprobs,
            top_logprobs=top_logprobs,
            **extra,
        )
        usage = out.get("usage") or {}
        choices = out["choices"]
        return [parse_chat_choice(c, usage, len(choices)) for c in choices]
