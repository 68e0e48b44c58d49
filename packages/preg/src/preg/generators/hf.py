"""transformers back-end: batched, KV-cached sampling with per-token log-probs."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from methodkit.torch import generator

from ..types import Path, Prompt
from ._loop import continue_grouped, sample_loop

__all__ = ["HFGenerator"]


def _is_chat(prompt: Any) -> bool:
    return (
        isinstance(prompt, Sequence)
        and len(prompt) > 0
        and all(isinstance(m, Mapping) for m in prompt)
    )


class HFGenerator:
    r"""Sample from a causal LM of ``transformers`` (``AutoModelForCausalLM``) with log-probs.

    A manual KV-cached loop: the prompt is fed once (batch 1) and its cache is shared by every
    sample of the batch; ``continue_`` feeds the kept prefixes on top of that cache, then one
    token per step. The log-probs recorded are those of the untempered next-token distribution,
    i.e. exactly what a teacher-forced forward pass over the same tokens gives. ``generate`` is
    not used: with ``num_return_sequences`` it prefills the prompt once per sequence (measured
    slower on CPU, see the README), and it has no way to start many different kept prefixes
    from one shared prompt cache.

    Prompts are strings (encoded with the tokenizer; its BOS token is prepended when the
    tokenizer's own ``add_bos_token`` says so) or chat messages, rendered by the tokenizer's
    chat template with the generation prompt appended.

    Args:
        model: a causal LM (``model(input_ids, past_key_values=..., use_cache=True)``); it stays
            on its own device and dtype.
        tokenizer: anything with ``encode(text, add_special_tokens=False)``, ``decode(ids)`` and
            ``eos_token_id`` (plus ``apply_chat_template`` for chat messages).
        top_k: top log-probs recorded per step.
        batch_size: sequences per forward batch.
        device: where the inputs go; default the model's own device. The model is never moved.
        stop_strings: a path also finishes at any token whose text contains one of these (for
            few-shot completion prompts, e.g. ``["\\n"]``); the stop token is kept in the path.
    """

    supports_logprobs = True
    accepts_messages = True  # sample() also takes chat messages (rendered by the tokenizer)

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        top_k: int = 20,
        batch_size: int = 16,
        device: Any = None,
        stop_strings: Iterable[str] | None = None,
    ) -> None:
        try:
            import torch
        except ImportError as exc:  # pragma: no cover
            raise ImportError("HFGenerator needs torch: pip install preg[hf]") from exc
        if top_k < 1 or batch_size < 1:
            raise ValueError(f"top_k and batch_size must be >= 1, got {top_k}, {batch_size}")
        if device is None:
            param = next(iter(model.parameters()), None)
            device = param.device if param is not None else torch.device("cpu")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.top_k, self.batch_size, self.device = top_k, batch_size, torch.device(device)
        self.eos_id = getattr(tokenizer, "eos_token_id", None)
        self.stop_ids: set[int] = set() if self.eos_id is None else {int(self.eos_id)}
        if stop_strings is not None:
            stops = [str(s) for s in stop_strings]
            if not stops or any(not s for s in stops):
                raise ValueError(f"stop_strings must be non-empty strings, got {stops}")
            vocab = len(tokenizer) if hasattr(tokenizer, "__len__") else None
            if vocab is None:
                raise TypeError("stop_strings needs a tokenizer with len() (its vocabulary size)")
            for t in range(vocab):
                text = tokenizer.decode([t])
                if any(s in text for s in stops):
                    self.stop_ids.add(t)
        # transformers >= 5.2x renamed ``past_key_values`` to ``cache``
        params = inspect.signature(type(model).forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    def encode(self, prompt: Prompt) -> list[int]:
        """Token ids of a prompt (string or chat messages), as the model sees them."""
        if isinstance(prompt, str):
            try:
                ids = list(self.tokenizer.encode(prompt, add_special_tokens=False))
            except TypeError:
                ids = list(self.tokenizer.encode(prompt))
            bos = getattr(self.tokenizer, "bos_token_id", None)
            add = bool(getattr(self.tokenizer, "add_bos_token", False))
            if add and bos is not None and ids[:1] != [bos]:
                ids = [int(bos), *ids]
        elif _is_chat(prompt):
            if not callable(getattr(self.tokenizer, "apply_chat_template", None)):
                raise TypeError("chat messages need a tokenizer with apply_chat_template")
            enc = self.tokenizer.apply_chat_template(
                list(prompt), add_generation_prompt=True, return_tensors="pt"
            )
            # transformers 5.x returns a BatchEncoding, 4.x a tensor
            ids_t = enc["input_ids"] if isinstance(enc, Mapping) or hasattr(enc, "keys") else enc
            ids = [int(t) for t in (ids_t[0] if getattr(ids_t, "ndim", 1) == 2 else ids_t)]
        else:
            raise TypeError(
                "prompt must be a str or a non-empty list of chat messages "
                f"({{'role': ..., 'content': ...}}), got {type(prompt).__name__}"
            )
        if not ids:
            raise ValueError("the prompt encodes to no tokens")
        return ids

    def _text(self, tok: int) -> str:
        if tok == self.eos_id:
            return ""
        return str(self.tokenizer.decode([tok]))

    def _run(
        self,
        base: list[int],
        tails: list[list[int]],
        steps: int,
        temperature: float,
        top_p: float,
        gen: Any,
    ) -> list[Path]:
        """Sample ``steps`` tokens after ``base + tail`` for each tail (tails of equal length)."""
        import torch

        out: list[Path] = []
        kw = self._cache_kw
        for s in range(0, len(tails), self.batch_size):
            chunk = tails[s : s + self.batch_size]
            bsz = len(chunk)

            def fwd(x: Any, past: Any, chunk: list[list[int]] = chunk, bsz: int = bsz) -> Any:
                if past is None:  # the prompt once, its cache shared by the batch
                    ids = torch.tensor([base], dtype=torch.long, device=self.device)
                    o = self.model(input_ids=ids, use_cache=True)
                    past = getattr(o, kw, None)
                    if callable(getattr(past, "batch_repeat_interleave", None)):
                        past.batch_repeat_interleave(bsz)
                        logits = o.logits[:, -1].expand(bsz, -1)
                    else:  # a cache that cannot be shared: prefill the whole batch
                        o = self.model(input_ids=ids.expand(bsz, -1), use_cache=True)
                        past, logits = getattr(o, kw), o.logits[:, -1]
                    if chunk[0]:
                        tail = torch.tensor(chunk, dtype=torch.long, device=self.device)
                        o = self.model(input_ids=tail, use_cache=True, **{kw: past})
                        past, logits = getattr(o, kw), o.logits[:, -1]
                    return logits.float().cpu(), past
                o = self.model(input_ids=x.to(self.device), use_cache=True, **{kw: past})
                return o.logits[:, -1].float().cpu(), getattr(o, kw)

            ctx = torch.zeros((bsz, 1), dtype=torch.long)  # only its batch size is read
            with torch.no_grad():
                out += sample_loop(
                    fwd, ctx, steps, self.stop_ids, temperature, top_p, self.top_k, gen, self._text
                )
        return out

    def sample(
        self,
        prompt: Prompt,
        n: int,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Path]:
        """``n`` independent samples of at most ``max_new_tokens`` tokens."""
        gen = generator(0 if seed is None else int(seed))
        base = self.encode(prompt)
        return self._run(base, [[] for _ in range(n)], max_new_tokens, temperature, top_p, gen)

    def continue_(
        self,
        prompt: Prompt,
        paths: Sequence[Path],
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Path]:
        """Continue prompt + prefix ids (prefix tokens unchanged) to ``max_new_tokens`` in total."""
        gen = generator(0 if seed is None else int(seed))
        base = self.encode(prompt)
        paths = list(paths)
        for p in paths:
            if not p.token_ids and p.n_tokens:
                raise ValueError("HFGenerator.continue_ needs paths with token_ids")

        def run(idx: list[int], steps: int) -> list[Path]:
            tails = [list(paths[i].token_ids) for i in idx]
            return self._run(base, tails, steps, temperature, top_p, gen)

        return continue_grouped(paths, max_new_tokens, run)
