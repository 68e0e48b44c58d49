"""HFVLM: a Hugging Face ``transformers`` model with a chat template (image-text or text-only)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from eva_agent.types import Evidence, Final, ToolCall
from eva_agent.vlm.base import (
    ANSWER_PREFIX,
    ReplyParseError,
    answer_prompt,
    parse_reply,
    plan_prompt,
    render_ledger,
)
from eva_agent.vlm.small import CHOICE_ANSWERS, SmallModelSteps
from methodkit.llm import ChatReply, check_chat_args

__all__ = ["CHOICE_ANSWERS", "HFVLM"]


class HFVLM(SmallModelSteps):
    """VLM over ``model.generate`` (greedy) with the processor's chat template.

    Confidence is the mean probability of the generated tokens (from ``output_scores``).
    ``text_only=True`` runs a language model as the text reasoner over the tools' evidence
    (the image is then seen only through the ledger).

    Args:
        model: ``AutoModelForImageTextToText`` (or a causal LM with ``text_only``).
        processor: Its processor (or tokenizer) with ``apply_chat_template`` and ``decode``.
        max_new_tokens: Generation budget per reply.
        text_only: Send no image.
        constrained: Small-model mode (text only): the plan step and the choice questions
            (yes/no, colour, shape) pick among their options by log-probability
            (:func:`methodkit.smollm2.score_options`), enum tool arguments likewise; open
            answers use a few-shot prompt and the first line of the reply.
    """

    def __init__(
        self,
        model: Any,
        processor: Any,
        *,
        max_new_tokens: int = 48,
        text_only: bool = False,
        constrained: bool = False,
    ) -> None:
        self.model, self.processor = model, processor
        self.max_new_tokens, self.text_only = int(max_new_tokens), bool(text_only or constrained)
        self.constrained = bool(constrained)
        self.n_generated = 0
        self.n_choices = 0  # constrained choices made (each one padded forward pass)
        self.n_fallbacks = 0  # open answers with none of the right kind, then chosen

    @classmethod
    def from_pretrained(cls, path: str, **kw: Any) -> HFVLM:
        """Load a local image-text-to-text checkpoint (``pip install "eva-agent[hf]"``)."""
        try:
            from transformers import AutoModelForImageTextToText, AutoProcessor
        except ImportError as e:
            raise ImportError('HFVLM needs: pip install "eva-agent[hf]"') from e
        return cls(
            AutoModelForImageTextToText.from_pretrained(path),
            AutoProcessor.from_pretrained(path),
            **kw,
        )

    def _tokenizer(self) -> Any:
        return getattr(self.processor, "tokenizer", None) or self.processor

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
        """Text chat (a :class:`methodkit.llm.ChatBackend`): greedy at ``temperature=0``.

        ``seed`` seeds sampling inside a forked RNG state (the global one is left as it was).
        """
        import torch

        msgs = check_chat_args(
            messages, n=n, temperature=temperature, max_tokens=max_tokens, stop=stop, seed=seed
        )
        tok = self._tokenizer()
        prompt = self.processor.apply_chat_template(
            msgs, add_generation_prompt=True, tokenize=False
        )
        inputs = tok(prompt, return_tensors="pt", add_special_tokens=False)
        device = next(self.model.parameters()).device
        ids = inputs["input_ids"].to(device)
        sample = temperature > 0
        gen: dict[str, Any] = {"max_new_tokens": max_tokens, "do_sample": sample}
        if sample:
            gen.update(temperature=temperature, num_return_sequences=n)
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        forked = [device] if device.type == "cuda" else []
        with torch.no_grad(), torch.random.fork_rng(devices=forked):
            if seed is not None:
                torch.manual_seed(seed)
            out = self.model.generate(
                ids, attention_mask=torch.ones_like(ids), pad_token_id=pad, **gen
            )
        replies = []
        for row in out if sample else out.repeat(n, 1):
            new = row[ids.shape[1] :].tolist()
            ends = [k for k, t in enumerate(new) if t in (pad, tok.eos_token_id)]
            new = new[: ends[0] + 1] if ends else new
            self.n_generated += len(new)
            text = tok.decode(new, skip_special_tokens=True)
            for s in stop or ():
                text = text.split(s)[0]
            replies.append(ChatReply(text, int(ids.shape[1]), len(new)))
        return replies

    def _generate(
        self, text: str, image: Any, max_new_tokens: int | None = None, prefix: str = ""
    ) -> tuple[str, float]:
        import torch

        messages: list[dict[str, Any]]
        if self.text_only or image is None:
            messages = [{"role": "user", "content": text}]
        else:
            messages = [
                {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}
            ]
        prompt = self.processor.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=False
        )
        prompt += prefix  # a forced start of the reply, which the model continues
        if self.text_only or image is None:
            inputs = self.processor(prompt, return_tensors="pt", add_special_tokens=False)
        else:
            inputs = self.processor(text=prompt, images=image, return_tensors="pt")
        with torch.no_grad():
            out = self.model.generate(
                **inputs,
                max_new_tokens=max_new_tokens or self.max_new_tokens,
                do_sample=False,
                output_scores=True,
                return_dict_in_generate=True,
            )
        start = inputs["input_ids"].shape[1]
        new = out.sequences[0, start:]
        logps = [
            torch.log_softmax(s[0].float(), -1)[int(t)].item()
            for s, t in zip(out.scores, new, strict=False)
        ]
        self.n_generated += len(new)
        dec = getattr(self.processor, "decode", None) or self.processor.tokenizer.decode
        conf = math.exp(sum(logps) / len(logps)) if logps else 0.0
        return dec(new, skip_special_tokens=True).strip(), float(conf)

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
        text, conf = self._generate(answer_prompt(question, evidence, hints), image)
        return (text.splitlines() or [""])[0].strip(), conf

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
        prompt = plan_prompt(question, ledger, feedback, hints)
        reply, _ = self._generate(prompt, image, max_new_tokens=96)
        try:
            return parse_reply(reply)
        except ReplyParseError as e:  # one repair retry
            fix = f"{prompt}\n\nYour reply {reply[:80]!r} could not be parsed ({e}). JSON only."
            reply2, _ = self._generate(fix, image, max_new_tokens=96)
            try:
                return parse_reply(reply2)
            except ReplyParseError as e2:
                raise ReplyParseError(f"after one repair retry: {e2}") from None

    def choose(self, prompt: str, options: Sequence[str], prefix: str = "") -> tuple[str, float]:
        """The likeliest option as the reply to ``prompt``, and its probability among them.

        ``prefix`` is text forced before the option (e.g. the colour before a shape).
        """
        from methodkit.smollm2 import score_options

        msgs = [{"role": "user", "content": prompt}]
        scores = score_options(self.model, self._tokenizer(), msgs, list(options), prefix=prefix)
        self.n_choices += 1
        top = max(scores)
        z = sum(math.exp(v - top) for v in scores)
        return list(options)[scores.index(top)], 1.0 / z

    def continue_answer(self, prompt: str, max_new_tokens: int = 8) -> tuple[str, float]:
        """Greedy continuation of a reply forced to start with ``Answer:`` (and its confidence)."""
        return self._generate(prompt, None, max_new_tokens=max_new_tokens, prefix=ANSWER_PREFIX)

    def judge(self, question: str, answer: str, ledger: list[Evidence]) -> str:
        """A one-line critique of ``answer``."""
        text = (
            f"Question: {question}\nProposed answer: {answer}\nEvidence:\n"
            f"{render_ledger(ledger)}\nCritique in one line; start with 'confident' or "
            "'uncertain'."
        )
        return self._generate(text, None, max_new_tokens=32)[0]
