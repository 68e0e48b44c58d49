"""HFChatModel: a Hugging Face causal LM through ``apply_chat_template`` + ``generate``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evochamber.backends.base import ChatResult, Message, check_choices
from methodkit.llm import check_chat_args

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
        """Reply to ``messages`` with ``n`` completions (greedy at ``temperature=0``).

        A final ``assistant`` message is a forced prefix: the reply is its continuation.

        ``seed`` seeds the sampling inside a forked RNG state (the global one is left as it was).
        """
        import torch

        msgs = check_chat_args(
            messages, n=n, temperature=temperature, max_tokens=max_tokens, stop=stop, seed=seed
        )
        # a final assistant message is a forced prefix: the reply continues it
        prefill = msgs[-1]["role"] == "assistant"
        ids = self.tokenizer.apply_chat_template(
            msgs,
            add_generation_prompt=not prefill,
            continue_final_message=prefill,
            return_tensors="pt",
        )
        if not isinstance(ids, torch.Tensor):  # newer transformers return a BatchEncoding
            ids = ids["input_ids"]
        device = next(self.model.parameters()).device
        ids = ids.to(device)
        sample = temperature > 0
        # greedy decoding gives one answer: generate it once and repeat it n times
        gen: dict[str, Any] = {"max_new_tokens": max_tokens, "do_sample": sample,
               "num_return_sequences": n if sample else 1}  # fmt: skip
        if sample:
            gen["temperature"] = temperature
        pad = self.tokenizer.pad_token_id
        if pad is None:
            pad = self.tokenizer.eos_token_id
        forked = [device] if device.type == "cuda" else []
        with torch.no_grad(), torch.random.fork_rng(devices=forked):
            if seed is not None:
                torch.manual_seed(seed)
            out = self.model.generate(
                ids, attention_mask=torch.ones_like(ids), pad_token_id=pad, **gen
            )
        results = []
        for row in out if sample else out.repeat(n, 1):
            new = row[ids.shape[1] :].tolist()
            ends = [k for k, t in enumerate(new) if t in (pad, self.tokenizer.eos_token_id)]
            new = new[: ends[0] + 1] if ends else new  # drop the padding after the end token
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            for s in stop or ():
                text = text.split(s)[0]
            results.append(ChatResult(text, int(ids.shape[1]), len(new)))
        return check_choices(results, "HFChatModel")
