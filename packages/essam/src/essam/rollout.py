"""Batched generation (left padding, KV cache) under ``torch.inference_mode()``."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch

from methodkit.torch import generator

__all__ = ["generate"]


@torch.inference_mode()
def generate(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    max_new_tokens: int = 32,
    temperature: float = 0.0,
    seed: int | None = None,
) -> list[str]:
    """Complete ``prompts`` with a causal LM; returns the decoded completions (without prompt).

    Greedy decoding when ``temperature == 0`` (so the reward is a deterministic function of the
    weights); sampling at ``temperature > 0`` with a ``torch.Generator`` seeded by ``seed``.
    Prompts are left padded, positions follow the attention mask, and decoding stops at the
    tokenizer's EOS token (which is cut from the text) or after ``max_new_tokens``.

    Args:
        model: A ``transformers`` causal LM (called with ``input_ids``, ``attention_mask``,
            ``position_ids``, ``past_key_values``, ``use_cache=True``).
        tokenizer: Its tokenizer (needs ``pad_token_id`` and ``eos_token_id``).
        prompts: The prompts.
        max_new_tokens: Tokens to generate at most (>= 1).
        temperature: 0 for greedy, > 0 to sample.
        seed: Seed of the sampling generator (``None``: 0).

    Raises:
        ValueError: If ``prompts`` is empty, ``max_new_tokens`` < 1 or ``temperature`` < 0.
        TypeError: If ``tokenizer`` is ``None``.
    """
    if tokenizer is None:
        raise TypeError("generate needs the model's tokenizer, got tokenizer=None")
    if len(prompts) == 0:
        raise ValueError("prompts must not be empty")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    device = next(model.parameters()).device
    old_side = getattr(tokenizer, "padding_side", "left")
    tokenizer.padding_side = "left"
    try:
        enc = tokenizer(list(prompts), return_tensors="pt", padding=True)
    finally:
        tokenizer.padding_side = old_side
    ids = enc["input_ids"].to(device)
    mask = enc["attention_mask"].to(device)
    eos = tokenizer.eos_token_id
    gen = None
    if temperature > 0:
        gen = generator(0 if seed is None else int(seed), device=device)
    was_training = model.training
    model.eval()
    try:
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        # transformers >= 5.2x renamed ``past_key_values`` to ``cache``; support both
        params = inspect.signature(model.forward).parameters
        cache_kw = "cache" if "cache" in params else "past_key_values"
        # only the last position's logits are needed: skip the LM head on the prompt
        last = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **last)
        past = getattr(out, cache_kw)
        logits = out.logits[:, -1, :]
        done = torch.zeros(ids.shape[0], dtype=torch.bool, device=device)
        new_tokens = []
        next_pos = pos[:, -1:] + 1
        for step in range(max_new_tokens):
            if temperature > 0:
                probs = torch.softmax(logits.float() / temperature, dim=-1)
                tok = torch.multinomial(probs, 1, generator=gen).squeeze(-1)
            else:
                tok = logits.argmax(-1)
            tok = torch.where(done, torch.full_like(tok, eos), tok)
            new_tokens.append(tok)
            done = done | (tok == eos)
            if bool(done.all()) or step == max_new_tokens - 1:
                break
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            out = model(
                input_ids=tok[:, None],
                attention_mask=mask,
                position_ids=next_pos,
                use_cache=True,
                **{cache_kw: past},
            )
            past = getattr(out, cache_kw)
            logits = out.logits[:, -1, :]
            next_pos = next_pos + 1
    finally:
        model.train(was_training)
    seqs = torch.stack(new_tokens, dim=1).tolist()
    texts = []
    for row in seqs:
        if eos in row:
            row = row[: row.index(eos)]
        texts.append(tokenizer.decode(row, skip_special_tokens=True))
    return texts
