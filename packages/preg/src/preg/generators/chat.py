"""GeneratorChat: any sampling back-end seen as a chat model (``methodkit.llm.ChatBackend``).

The agents' chat contract (:func:`methodkit.testing.check_chat_backend`) is checked on preg's
back-ends through this adapter: ``chat(messages, ...)`` samples with ``generator.sample``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from methodkit.llm import ChatReply, check_chat_args

from ..types import Path
from .base import Generator

__all__ = ["GeneratorChat"]


class GeneratorChat:
    """Chat completions over a :class:`~preg.generators.Generator`.

    Args:
        generator: The sampling back-end (``HFGenerator``, ``OpenAICompatGenerator``, ...).
        render: ``f(messages) -> prompt`` (e.g. a chat template rendered to text for an
            HTTP completions server); by default the messages go to ``sample`` as they are,
            which needs a generator with ``accepts_messages = True`` (``HFGenerator`` renders
            them with the tokenizer's chat template).
        top_p: Nucleus mass when sampling (``temperature > 0``).

    Raises:
        TypeError: If ``generator`` has no ``sample`` method, or takes text prompts only
            (no ``accepts_messages``) and no ``render`` is given.
    """

    def __init__(
        self,
        generator: Generator,
        render: Callable[[list[dict[str, Any]]], Any] | None = None,
        *,
        top_p: float = 1.0,
    ) -> None:
        if not callable(getattr(generator, "sample", None)):
            raise TypeError(f"generator must have a sample() method, got {generator!r}")
        if render is None and not getattr(generator, "accepts_messages", False):
            raise TypeError(
                f"{type(generator).__name__} samples from text prompts, not chat messages: "
                "pass render=f(messages) -> str (e.g. the model's chat template)"
            )
        self.generator, self.render, self.top_p = generator, render, float(top_p)

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_tokens: int = 256,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> list[ChatReply]:
        """``n`` replies to ``messages``; ``stop`` cuts each reply's text."""
        msgs = check_chat_args(
            messages, n=n, temperature=temperature, max_tokens=max_tokens, stop=stop, seed=seed
        )
        prompt = self.render(msgs) if self.render is not None else msgs
        # without render, the generator takes messages (accepts_messages, checked in __init__)
        sample: Callable[..., list[Path]] = self.generator.sample
        paths = sample(prompt, n, max_tokens, temperature=temperature, top_p=self.top_p, seed=seed)
        encode = getattr(self.generator, "encode", None)
        n_prompt = len(encode(prompt)) if callable(encode) else 0
        replies = []
        for p in paths:
            text = p.text
            for s in stop or ():
                text = text.split(s)[0]
            finish = "stop" if p.finished else "length"
            replies.append(ChatReply(text, n_prompt, p.n_tokens, finish))
        return replies
