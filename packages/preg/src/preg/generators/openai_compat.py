"""OpenAI-compatible HTTP back-end (vLLM, llama.cpp ``llama-server``).

The transport is the core's :class:`methodkit.llm.OpenAIClient` (standard library, retries with
backoff on 429 / 5xx / timeouts, errors naming the URL and status).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from methodkit.llm import LLMResponseError, OpenAIClient

from ..types import Path

__all__ = ["OpenAICompatGenerator"]

_NO_LOGPROBS = (
    "the server returned no token logprobs; request logprobs (vLLM: start with --max-logprobs >= "
    "top_logprobs; llama.cpp llama-server: a build with n_probs/logprobs support)"
)


class OpenAICompatGenerator:
    """Sample through ``POST {base_url}/completions`` with ``logprobs=k``.

    Continuation sends ``prompt = template(prompt) + prefix text`` (``mode="completions"``), or an
    assistant message to continue (``mode="chat_prefill"``, vLLM's ``continue_final_message``).

    Args:
        base_url: e.g. ``"http://localhost:8000/v1"``.
        model: model name sent to the server.
        api_key: optional bearer token.
        top_logprobs: ``k`` top log-probs per token.
        mode: ``"completions"`` or ``"chat_prefill"``.
        prompt_template: ``f(prompt) -> text`` (e.g. a chat template), identity by default.
        timeout: seconds per request.
        max_retries: retries on 429 / 5xx / timeouts / connection errors.
        backoff: first retry delay in seconds (doubles each retry).

    Raises:
        ValueError: on a bad ``mode``, ``top_logprobs``, ``base_url``, ``timeout`` or
            ``max_retries``.
        methodkit.llm.LLMResponseError: (a ``RuntimeError``) when the server returns no token
            logprobs, the wrong number of choices, or ignores the assistant prefill.
        methodkit.llm.LLMError: when the server fails (HTTP status, timeout, unreachable).
    """

    supports_logprobs = True

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        top_logprobs: int = 5,
        mode: str = "completions",
        prompt_template: Callable[[str], str] | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        backoff: float = 0.5,
    ) -> None:
        if mode not in ("completions", "chat_prefill"):
            raise ValueError(f"mode must be 'completions' or 'chat_prefill', got {mode!r}")
        if top_logprobs < 1:
            raise ValueError(f"top_logprobs must be >= 1, got {top_logprobs}")
        self.client = OpenAIClient(
            base_url,
            model,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
        )
        self.base_url = self.client.base_url
        self.model, self.api_key, self.top_logprobs, self.mode = model, api_key, top_logprobs, mode
        self.prompt_template = prompt_template or (lambda s: s)
        self.timeout, self.max_retries, self.backoff = timeout, max_retries, backoff

    def _post(self, route: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self.client.post(route, payload)

    def _fail(self, message: str) -> LLMResponseError:
        return LLMResponseError(f"{self.base_url}: {message}", self.base_url)

    def _parse_all(
        self, parse: Callable[[dict[str, Any]], Path], resp: dict[str, Any]
    ) -> list[Path]:
        try:
            return [parse(c) for c in resp.get("choices", [])]
        except LLMResponseError as exc:
            raise self._fail(str(exc)) from None

    @staticmethod
    def _parse_completion(choice: dict[str, Any]) -> Path:
        lp = choice.get("logprobs")
        if not lp or lp.get("token_logprobs") is None:
            raise LLMResponseError(_NO_LOGPROBS, "")
        tokens = list(lp.get("tokens") or [])
        tlp = [float(x) if x is not None else 0.0 for x in lp["token_logprobs"]]
        top = lp.get("top_logprobs")
        topk = None
        if top:
            k = min(len(d or {}) for d in top) or None
            if k:
                topk = np.array([sorted((d or {}).values(), reverse=True)[:k] for d in top])
        return Path(
            token_ids=[],
            text=choice.get("text", "".join(tokens)),
            token_logprobs=np.asarray(tlp),
            topk_logprobs=topk,
            finished=choice.get("finish_reason") == "stop",
            token_texts=tokens,
        )

    @staticmethod
    def _parse_chat(choice: dict[str, Any]) -> Path:
        lp = choice.get("logprobs")
        content = (lp or {}).get("content")
        if not content:
            raise LLMResponseError(_NO_LOGPROBS, "")
        tokens = [c["token"] for c in content]
        tlp = [float(c["logprob"]) for c in content]
        tops = [c.get("top_logprobs") or [] for c in content]
        k = min(len(t) for t in tops)
        topk = (
            np.array([sorted((x["logprob"] for x in t), reverse=True)[:k] for t in tops])
            if k
            else None
        )
        return Path(
            [],
            "".join(tokens),
            np.asarray(tlp),
            topk_logprobs=topk,
            finished=choice.get("finish_reason") == "stop",
            token_texts=tokens,
        )

    def _request(
        self,
        prompt: str,
        prefix: str,
        n: int,
        max_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | None,
    ) -> list[Path]:
        common: dict[str, Any] = {
            "model": self.model,
            "n": n,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "top_p": top_p,
        }
        if seed is not None:
            common["seed"] = seed
        if self.mode == "completions":
            payload = {
                **common,
                "prompt": self.prompt_template(prompt) + prefix,
                "logprobs": self.top_logprobs,
            }
            resp = self._post("/completions", payload)
            paths = self._parse_all(self._parse_completion, resp)
        else:
            messages = [{"role": "user", "content": prompt}]
            if prefix:
                messages.append({"role": "assistant", "content": prefix})
            payload = {
                **common,
                "messages": messages,
                "logprobs": True,
                "top_logprobs": self.top_logprobs,
            }
            if prefix:
                payload.update(continue_final_message=True, add_generation_prompt=False)
            resp = self._post("/chat/completions", payload)
            paths = self._parse_all(self._parse_chat, resp)
            if prefix and any(p.text.startswith(prefix) for p in paths if len(prefix) > 8):
                raise self._fail(
                    "the server ignored the assistant prefill (it restarted the answer); use "
                    "mode='completions' with a chat prompt_template instead"
                )
        if len(paths) != n:
            raise self._fail(f"asked for n={n} choices, the server returned {len(paths)}")
        return paths

    def sample(
        self,
        prompt: str,
        n: int,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Path]:
        """``n`` samples of at most ``max_new_tokens`` tokens (one request with ``n``)."""
        return self._request(prompt, "", n, max_new_tokens, temperature, top_p, seed)

    def continue_(
        self,
        prompt: str,
        paths: Sequence[Path],
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Path]:
        """Continue each path by sending its text after the prompt (prefix tokens kept)."""
        out = []
        for i, p in enumerate(paths):
            if p.finished or p.n_tokens >= max_new_tokens:
                out.append(p)
                continue
            s = None if seed is None else seed + i
            rest = self._request(
                prompt, p.text, 1, max_new_tokens - p.n_tokens, temperature, top_p, s
            )[0]
            out.append(Path.concat(p, rest))
        return out
