"""OpenAIVLM: any OpenAI-compatible chat endpoint with image content parts.

vLLM, llama.cpp server with a multimodal projector, Ollama and hosted APIs accept them. The
transport is the core's :class:`methodkit.llm.OpenAIClient` (timeouts, retries with backoff on
429 / 5xx, errors naming the URL and status).
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from eva_agent.types import Evidence, Final, ToolCall
from eva_agent.vlm.base import (
    ImageNotSupportedError,
    ReplyParseError,
    answer_prompt,
    parse_reply,
    plan_prompt,
    render_ledger,
)
from methodkit.llm import ChatReply, LLMHTTPError, OpenAIClient

#: Statuses with which servers refuse an image part they cannot read.
IMAGE_REJECTED = (400, 415, 422, 500)


def data_url(image: Any) -> str:
    """A PNG ``data:`` URL of a PIL image."""
    buf = io.BytesIO()
    image.save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


class OpenAIVLM:
    """VLM over ``POST {base_url}/chat/completions``.

    The image travels as a base64 data-URL ``image_url`` content part. Confidence is the
    answer tokens' mean probability from ``logprobs`` when the server returns them, else the
    agreement of ``samples`` answers (temperature 0.7). Tool calls use a JSON protocol in the
    text (one repair retry on a malformed reply); ``native_tools=True`` also sends the tools as
    OpenAI ``tools`` and reads ``tool_calls``.

    Args:
        base_url: E.g. ``http://localhost:8000/v1``.
        model: Model name on the server.
        api_key: Sent as a bearer token when given.
        timeout: Seconds per request.
        samples: m for the agreement confidence (spec: 3).
        max_tokens: Completion budget of an answer.
        native_tools: Also use the server's native tool calling.
        max_retries: Retries on 429 / 5xx / timeouts / refused connections.
        backoff: First retry wait in seconds (doubles each retry).

    Raises:
        ValueError: On a base_url that is not http(s) or a bad timeout / max_retries.
        ImageNotSupportedError: On the first call, when the server rejects image parts.
        methodkit.llm.LLMError: When the server fails (HTTP status, timeout, unreachable).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        samples: int = 3,
        max_tokens: int = 64,
        native_tools: bool = False,
        max_retries: int = 3,
        backoff: float = 0.5,
    ) -> None:
        self.client = OpenAIClient(
            base_url,
            model,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
        )
        self.base_url, self.model, self.api_key = self.client.base_url, model, api_key
        self.timeout, self.samples, self.max_tokens = float(timeout), int(samples), max_tokens
        self.native_tools = bool(native_tools)
        self.image_ok: bool | None = None  # learnt on the first call with an image

    @property
    def n_requests(self) -> int:
        """HTTP requests sent so far (retries included)."""
        return self.client.n_requests

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        **extra: Any,
    ) -> list[ChatReply]:
        """Plain chat completions (a :class:`methodkit.llm.ChatBackend`)."""
        return self.client.chat(
            messages,
            n=n,
            temperature=temperature,
            max_tokens=max_tokens,
            stop=stop,
            seed=seed,
            **extra,
        )

    def _post(self, payload: dict[str, Any], with_image: bool) -> dict[str, Any]:
        try:
            out = self.client.chat_raw(**payload)
        except LLMHTTPError as e:
            if with_image and self.image_ok is None and e.status in IMAGE_REJECTED:
                raise ImageNotSupportedError(
                    f"{self.base_url} (model {self.model!r}) rejected the image content part "
                    f"(HTTP {e.status}: {e.body}); serve a vision model, e.g. vLLM with a VL "
                    "model or llama.cpp server with --mmproj"
                ) from None
            raise
        if with_image:
            self.image_ok = True
        return out

    def _messages(self, text: str, image: Any) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if image is not None:
            content.insert(0, {"type": "image_url", "image_url": {"url": data_url(image)}})
        return [{"role": "user", "content": content}]

    def _chat(self, messages: list[dict], with_image: bool, **extra: Any) -> dict[str, Any]:
        payload = {"messages": messages, "max_tokens": self.max_tokens, "temperature": 0.0}
        return self._post({**payload, **extra}, with_image)["choices"][0]

    @staticmethod
    def _logprob_conf(choice: dict[str, Any]) -> float | None:
        lp = (choice.get("logprobs") or {}).get("content") or []
        vals = [t["logprob"] for t in lp if isinstance(t, dict) and "logprob" in t]
        return math.exp(sum(vals) / len(vals)) if vals else None

    def answer(
        self,
        image: Any,
        question: str,
        evidence: list[Evidence] | None = None,
        *,
        hints: dict[str, Any] | None = None,
        sample: int = 0,
    ) -> tuple[str, float]:
        """``(text, confidence)`` for the question (with evidence when given)."""
        msgs = self._messages(answer_prompt(question, evidence, hints), image)
        temp = 0.0 if sample == 0 else 0.7
        choice = self._chat(msgs, image is not None, logprobs=True, temperature=temp)
        text = (choice["message"].get("content") or "").strip()
        conf = self._logprob_conf(choice)
        if conf is None:  # agreement of m samples
            others = [
                (
                    self._chat(msgs, image is not None, temperature=0.7)["message"].get("content")
                    or ""
                )
                .strip()
                .lower()
                for _ in range(self.samples - 1)
            ]
            conf = (1 + sum(o == text.lower() for o in others)) / self.samples
        return text, float(conf)

    def plan(
        self,
        image: Any,
        question: str,
        ledger: list[Evidence],
        feedback: dict[str, Any] | None = None,
        *,
        hints: dict[str, Any] | None = None,
    ) -> ToolCall | Final:
        """The next ToolCall, or Final when the evidence suffices."""
        msgs = self._messages(plan_prompt(question, ledger, feedback, hints), image)
        extra: dict[str, Any] = {"max_tokens": 200}
        if self.native_tools and hints and hints.get("tools"):
            extra["tools"] = [
                {"type": "function", "function": {"name": t["name"], "parameters": t["schema"]}}
                for t in hints["tools"]
            ]
        choice = self._chat(msgs, image is not None, **extra)
        calls = choice["message"].get("tool_calls") or []
        if calls:
            fn = calls[0]["function"]
            try:
                return ToolCall(fn["name"], json.loads(fn.get("arguments") or "{}"))
            except json.JSONDecodeError:
                pass
        reply = choice["message"].get("content") or ""
        try:
            return parse_reply(reply)
        except ReplyParseError as e:  # one repair retry
            msgs = [
                *msgs,
                {"role": "assistant", "content": reply},
                {
                    "role": "user",
                    "content": f"That reply could not be parsed ({e}). Reply with "
                    'one JSON object only: {"tool": NAME, "args": {...}} or {"final": ANSWER}.',
                },
            ]
            reply2 = self._chat(msgs, image is not None, max_tokens=200)["message"].get("content")
            try:
                return parse_reply(reply2 or "")
            except ReplyParseError as e2:
                raise ReplyParseError(f"after one repair retry: {e2}") from None

    def judge(self, question: str, answer: str, ledger: list[Evidence]) -> str:
        """A one-line critique of ``answer``."""
        text = (
            f"Question: {question}\nProposed answer: {answer}\nEvidence:\n"
            f"{render_ledger(ledger)}\nCritique the answer in one line; start with "
            "'confident' or 'uncertain'."
        )
        return self._chat(self._messages(text, None), False)["message"].get("content") or ""
