"""The chat back-end contract, and a loopback OpenAI-compatible server to run it against.

Every chat back-end of eva-agent, evochamber and preg (transformers, OpenAI-compatible HTTP,
simulators and test doubles) implements :class:`methodkit.llm.ChatBackend`;
:func:`check_chat_backend` checks the behaviour the agents rely on. Standard library only.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["LoopbackChatServer", "check_chat_backend", "echo_reply"]

USER = [{"role": "user", "content": "Name a colour."}]
MULTI = [
    {"role": "system", "content": "Reply with one word."},
    {"role": "user", "content": "Grüße aus 東京: name a colour."},
    {"role": "assistant", "content": "red"},
    {"role": "user", "content": "Another one?"},
]
BAD_ARGS: tuple[tuple[str, dict[str, Any], type[Exception]], ...] = (
    ("empty messages", {"messages": []}, ValueError),
    ("unknown role", {"messages": [{"role": "robot", "content": "x"}]}, ValueError),
    ("non-str content", {"messages": [{"role": "user", "content": 3}]}, TypeError),
    ("n=0", {"n": 0}, ValueError),
    ("max_tokens=0", {"max_tokens": 0}, ValueError),
    ("temperature=-1", {"temperature": -1.0}, ValueError),
    ("bare-string stop", {"stop": "x"}, TypeError),
)


def _check_replies(name: str, replies: Any, n: int, max_tokens: int) -> list[str]:
    if not isinstance(replies, list) or len(replies) != n:
        raise AssertionError(f"{name}: expected a list of {n} replies, got {replies!r}")
    for k, r in enumerate(replies):
        if not isinstance(getattr(r, "text", None), str):
            raise AssertionError(f"{name}: reply {k} has no str text: {r!r}")
        for attr in ("prompt_tokens", "completion_tokens"):
            v = getattr(r, attr, None)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise AssertionError(f"{name}: reply {k}.{attr} must be an int >= 0, got {v!r}")
        if r.completion_tokens > max_tokens:
            raise AssertionError(
                f"{name}: reply {k} used {r.completion_tokens} tokens > max_tokens={max_tokens}"
            )
    return [r.text for r in replies]


def _check_stop(backend: Any, greedy: str, max_tokens: int) -> str:
    cut = next((k for k in range(1, len(greedy)) if not greedy[k].isspace()), None)
    if cut is None:
        return "skipped (greedy reply shorter than two characters)"
    stop = greedy[cut : cut + 2]
    (text,) = _check_replies(
        "stop", backend.chat(USER, max_tokens=max_tokens, stop=[stop]), 1, max_tokens
    )
    if stop in text or not greedy.startswith(text):
        raise AssertionError(
            f"stop: with stop={[stop]!r} the reply {text!r} should be the greedy reply "
            f"{greedy!r} cut before the stop string"
        )
    return f"cut at {stop!r}"


def check_chat_backend(backend: Any, *, max_tokens: int = 8, seeded: bool = True) -> dict[str, str]:
    """Check that ``backend`` honours the chat back-end contract; raise AssertionError if not.

    Checks: ``chat`` returns a list of ``n`` replies with a str ``text`` and int token counts
    (``completion_tokens <= max_tokens``); greedy decoding (``temperature=0``) repeats itself;
    a system turn, a multi-turn history and non-ASCII text are accepted; ``stop`` cuts the
    greedy reply before the stop string; with ``seeded``, sampling with a ``seed`` repeats
    itself; bad arguments (empty messages, unknown role, non-str content, ``n=0``,
    ``max_tokens=0``, negative temperature, a bare-string ``stop``) raise ``ValueError`` or
    ``TypeError`` before any work.

    Args:
        backend: An object with ``chat(messages, *, n, temperature, max_tokens, stop, seed)``.
        max_tokens: The generation budget used by the checks.
        seeded: Whether the back-end promises reproducible sampling under ``seed``.

    Returns:
        The checks run, each with a short note.
    """
    if not callable(getattr(backend, "chat", None)):
        raise AssertionError(f"{type(backend).__name__} has no chat() method")
    done: dict[str, str] = {}
    (greedy,) = _check_replies(
        "one reply", backend.chat(USER, max_tokens=max_tokens), 1, max_tokens
    )
    done["one reply"] = repr(greedy)
    again = _check_replies("n=3", backend.chat(USER, n=3, max_tokens=max_tokens), 3, max_tokens)
    if again != [greedy] * 3:
        raise AssertionError(f"greedy: n=3 greedy replies {again!r} differ from {greedy!r}")
    done["greedy repeats"] = "3 of 3 equal"
    multi = _check_replies("multi-turn", backend.chat(MULTI, max_tokens=max_tokens), 1, max_tokens)
    done["multi-turn + non-ASCII"] = repr(multi[0])
    done["stop"] = _check_stop(backend, greedy, max_tokens)
    if seeded:
        sampled: dict[str, Any] = {"temperature": 1.0, "max_tokens": max_tokens, "seed": 7, "n": 2}
        a = _check_replies("seeded", backend.chat(USER, **sampled), 2, max_tokens)
        b = _check_replies("seeded", backend.chat(USER, **sampled), 2, max_tokens)
        if a != b:
            raise AssertionError(f"seeded: two calls with seed=7 gave {a!r} and {b!r}")
        done["seeded sampling repeats"] = repr(a)
    for what, change, error in BAD_ARGS:
        kw: dict[str, Any] = {"max_tokens": max_tokens, **change}
        messages = kw.pop("messages", USER)
        try:
            backend.chat(messages, **kw)
        except error:
            continue
        except Exception as exc:
            raise AssertionError(
                f"bad argument ({what}) raised {exc!r}, not {error.__name__}"
            ) from exc
        raise AssertionError(f"bad argument ({what}) raised nothing, expected {error.__name__}")
    done["bad arguments"] = f"{len(BAD_ARGS)} of {len(BAD_ARGS)} rejected"
    return done


def echo_reply(messages: Sequence[Mapping[str, Any]]) -> str:
    """A deterministic reply: "you said:" and the last user message's words."""
    last = next(m for m in reversed(messages) if m.get("role") == "user")
    content = last["content"]
    if not isinstance(content, str):  # content parts: keep the text ones
        content = " ".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return "you said: " + content


class LoopbackChatServer:
    """An OpenAI-compatible ``/chat/completions`` server on 127.0.0.1 in a thread.

    Replies come from ``reply(messages) -> str`` (one token per word: ``max_tokens`` keeps the
    first words, ``stop`` cuts, ``usage`` counts words); ``failures`` is a list of HTTP statuses
    answered, in turn, before the first success. Every request body is kept in ``bodies``.

    Example:
        >>> with LoopbackChatServer() as srv:  # doctest: +SKIP
        ...     OpenAIClient(srv.url, "m").chat([{"role": "user", "content": "hi"}])
    """

    def __init__(
        self,
        reply: Callable[[Sequence[Mapping[str, Any]]], str] = echo_reply,
        failures: Sequence[int] = (),
    ) -> None:
        self.reply, self.failures = reply, list(failures)
        self.bodies: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(size))
                owner.bodies.append(body)
                if owner.failures:
                    self.send_response(owner.failures.pop(0))
                    self.end_headers()
                    return
                data = json.dumps(owner.answer(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def answer(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON answer to one request body."""
        words = self.reply(body["messages"]).split(" ")
        text = " ".join(words[: int(body.get("max_tokens", 256))])
        finish = "length" if len(words) > int(body.get("max_tokens", 256)) else "stop"
        for s in body.get("stop") or ():
            if s in text:
                text, finish = text.split(s)[0], "stop"
        n = int(body.get("n", 1))
        prompt = sum(len(str(m.get("content", "")).split()) for m in body["messages"])
        choice = {"message": {"role": "assistant", "content": text}, "finish_reason": finish}
        return {
            "choices": [dict(choice, index=k) for k in range(n)],
            "usage": {"prompt_tokens": prompt, "completion_tokens": n * len(text.split())},
        }

    def __enter__(self) -> LoopbackChatServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
