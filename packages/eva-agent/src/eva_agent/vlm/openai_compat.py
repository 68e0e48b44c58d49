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
    ANSWER_PREFIX,
    ImageNotSupportedError,
    ReplyParseError,
    answer_prompt,
    parse_reply,
    plan_prompt,
    render_ledger,
)
from eva_agent.vlm.small import SmallModelSteps
from methodkit.llm import ChatReply, LLMHTTPError, OpenAIClient, parse_choice

#: Statuses with which servers refuse an image part they cannot read.
IMAGE_REJECTED = (400, 415, 422, 500)


def data_url(image: Any) -> str:
    """A PNG ``data:`` URL of a PIL image."""
    buf = io.BytesIO()
    image.save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def first_token_scores(choice: Mapping[str, Any], options: Sequence[str]) -> dict[str, float]:
    """Log-probability of each option's start among the first generated token's alternatives.

    An option scores the best ``top_logprobs`` entry whose stripped token is a non-empty prefix
    of it (case-insensitive); options no alternative starts are left out.
    """
    content = (choice.get("logprobs") or {}).get("content") or []
    if not content or not isinstance(content[0], Mapping):
        return {}
    alts = list(content[0].get("top_logprobs") or []) or [content[0]]
    out: dict[str, float] = {}
    for o in options:
        for alt in alts:
            tok = str(alt.get("token", "")).strip().lower()
            lp = alt.get("logprob")
            if tok and o.strip().lower().startswith(tok) and isinstance(lp, int | float):
                out[o] = max(out.get(o, -math.inf), float(lp))
    return out


class OpenAIVLM(SmallModelSteps):
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
        constrained: Small-model mode (text only), as ``HFVLM(constrained=True)``: the plan
            step, enum arguments and answers with a known space are choices (read from the
            first token's ``top_logprobs`` when the server returns them, else from the reply's
            text; neither: the first option, counted in ``n_fallbacks``); other answers
            continue a forced ``Answer:`` (a final assistant message).
        prefill_extra: Body fields sent with a forced reply prefix (vLLM:
            ``{"continue_final_message": True, "add_generation_prompt": False}``; the
            llama.cpp server and Ollama need none).
        max_retries: Retries on 429 / 5xx / timeouts / refused connections.
        backoff: First retry wait in seconds (doubles each retry).

    Raises:
        ValueError: On a base_url that is not http(s) or a bad timeout / max_retries.
        TypeError: On a ``prefill_extra`` that is not a mapping.
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
        constrained: bool = False,
        prefill_extra: Mapping[str, Any] | None = None,
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
        self.constrained = bool(constrained)
        if prefill_extra is not None and not isinstance(prefill_extra, Mapping):
            raise TypeError(f"prefill_extra must be a mapping or None, got {prefill_extra!r}")
        self.prefill_extra = dict(prefill_extra or {})
        self.n_choices = self.n_fallbacks = 0

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
        if self.constrained:
            return self.small_answer(question, evidence)
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
        if self.constrained and hints and hints.get("tools"):
            return self.small_plan(question, ledger, feedback, hints["tools"])
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

    def _text_turns(self, prompt: str, prefix: str) -> tuple[list[dict[str, Any]], dict]:
        msgs: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        if not prefix:
            return msgs, {}
        return [*msgs, {"role": "assistant", "content": prefix}], dict(self.prefill_extra)

    def choose(self, prompt: str, options: Sequence[str], prefix: str = "") -> tuple[str, float]:
        """The option the model starts its reply with, and its share of the options' mass.

        Scored from the first token's ``top_logprobs`` (options sharing a first token: the one
        the reply names, else the first); without logprobs, the option the reply names
        (:func:`methodkit.llm.parse_choice`, share 1); neither: the first option (share
        ``1 / len(options)``, counted in ``n_fallbacks``).
        """
        options = list(options)
        msgs, extra = self._text_turns(prompt, prefix)
        choice = self._chat(msgs, False, max_tokens=8, logprobs=True, top_logprobs=20, **extra)
        self.n_choices += 1
        text = choice["message"].get("content") or ""
        named = parse_choice(text, [o.strip() or o for o in options])
        scores = first_token_scores(choice, options)
        if scores:
            top = max(scores.values())
            tied = [o for o in options if scores.get(o) == top]
            pick = next((o for o in tied if o.strip() == named), tied[0])
            z = sum(math.exp(v - top) for v in scores.values())
            return pick, 1.0 / z
        if named is not None:
            return next(o for o in options if (o.strip() or o) == named), 1.0
        self.n_fallbacks += 1
        return options[0], 1.0 / len(options)

    def continue_answer(self, prompt: str, max_new_tokens: int = 8) -> tuple[str, float]:
        """The continuation of a reply forced to start with ``Answer:`` (and its confidence)."""
        msgs, extra = self._text_turns(prompt, ANSWER_PREFIX)
        choice = self._chat(msgs, False, max_tokens=max_new_tokens, logprobs=True, **extra)
        conf = self._logprob_conf(choice)
        return choice["message"].get("content") or "", 0.5 if conf is None else conf

    def judge(self, question: str, answer: str, ledger: list[Evidence]) -> str:
        """A one-line critique of ``answer``."""
        text = (
            f"Question: {question}\nProposed answer: {answer}\nEvidence:\n"
            f"{render_ledger(ledger)}\nCritique the answer in one line; start with "
            "'confident' or 'uncertain'."
        )
        return self._chat(self._messages(text, None), False)["message"].get("content") or ""
