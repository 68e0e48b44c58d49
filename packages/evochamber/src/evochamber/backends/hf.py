"""HFChatModel: a Hugging Face causal LM through ``apply_chat_template`` + ``generate``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evochamber.backends.base import ChatResult, Message, check_choices

_EXTRA = 'pip install "evochamber[hf]"'


class HFChatModel:
    """Chat over a transformers model and tokenizer (any device; follows the model's).

    Args:
        model: A ``PreTrainedModel`` with ``generate``.
        tokenizer: Its tokenizer, with a chat template.
    """

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model, self.tokenizer = model, tokenizer

    @classmethod
    def from_pretrained(cls, name: str, **kwargs: Any) -> HFChatModel:
        """Load the user's own weights by name or path."""
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise ImportError(f"HFChatModel needs transformers: {_EXTRA}") from exc
        return cls(AutoModelForCausalLM.from_pretrained(name, **kwargs),
                   AutoTokenizer.from_pretrained(name))  # fmt: skip

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
        import torch

        ids = self.tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, return_tensors="pt"
        )
        if not isinstance(ids, torch.Tensor):  # newer transformers return a BatchEncoding
            ids = ids["input_ids"]
        ids = ids.to(next(self.model.parameters()).device)
        if seed is not None:
            torch.manual_seed(seed)
        sample = temperature > 0
        gen = {"max_new_tokens": max_tokens, "do_sample": sample, "num_return_sequences": n}
        if sample:
            gen["temperature"] = temperature
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        with torch.no_grad():
            out = self.model.generate(
                ids, attention_mask=torch.ones_like(ids), pad_token_id=pad, **gen
            )
        results = []
        for row in out:
            new = row[ids.shape[1] :]
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            for s in stop or ():
                text = text.split(s)[0]
            results.append(ChatResult(text, int(ids.shape[1]), len(new)))
        return check_choices(results, "HFChatModel")
