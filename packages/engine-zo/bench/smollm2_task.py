"""True/false number comparisons scored by SmolLM2's verbalizer log-likelihood, fast.

The task: a fixed four-shot prompt of comparisons ``"a is greater than b: True"`` (or ``False``;
numbers 0..20), then one statement to judge. Its loss is the cross-entropy of the two verbalizer
logits at the last position (the prompt-based classification of MeZO); accuracy is their argmax.

Tuned subset: the last decoder block's MLP down projection and post-attention norm, plus the
final norm (885,888 of SmolLM2's 134.5M parameters). Every value the tuned weights cannot change
is computed once per set of statements (:func:`cache_statements`): the hidden states entering
the last block, and that block's keys and values (its input norm, ``k_proj``, ``v_proj`` and
RoPE are frozen). A forward pass then runs only the last position through the last block's
attention (frozen ``q_proj``/``o_proj``) and MLP, the final norm and the two verbalizer rows of
the tied head (:class:`TunedTail`): the same function of the tuned weights as the full model's
forward, checked against it in ``tests/test_smollm2_task.py``.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass
from typing import Any

import torch

SHOTS = ((7, 3), (2, 9), (15, 4), (6, 11))  # true, false, true, false
MAX_NUMBER = 20


def statement(a: int, b: int) -> str:
    return f"{a} is greater than {b}:"


def is_true(row: tuple[int, int]) -> bool:
    return row[0] > row[1]


def few_shot_prefix(words: tuple[str, str]) -> str:
    """The four solved examples (``words`` = (word for true, word for false))."""
    return "".join(f"{statement(*r)}{words[not is_true(r)]}\n" for r in SHOTS)


def make_statements(n: int, seed: int, exclude: set | None = None) -> list[tuple[int, int]]:
    """``n`` distinct statements ``a > b`` on numbers in 0..20, half true, shuffled.

    ``exclude`` keeps held-out statements apart from training ones (and from the shots).
    """
    rng = random.Random(seed)
    taken = set(SHOTS) | (exclude or set())
    out: list[tuple[int, int]] = []
    while len(out) < n:
        row = (rng.randint(0, MAX_NUMBER), rng.randint(0, MAX_NUMBER))
        if row[0] == row[1] or row in taken or is_true(row) != (len(out) % 2 == 0):
            continue
        taken.add(row)
        out.append(row)
    rng.shuffle(out)
    return out


def verbalizer_ids(tokenizer: Any, words: tuple[str, str]) -> list[int]:
    """The token id of each verbalizer word; each must be exactly one token."""
    ids = [tokenizer.encode(w, add_special_tokens=False) for w in words]
    if any(len(i) != 1 for i in ids):
        got = dict(zip(words, ids, strict=True))
        raise ValueError(f"each verbalizer must be one token, got {got}")
    return [i[0] for i in ids]


def tuned_parameters(model: Any) -> list[torch.nn.Parameter]:
    """Freeze the model but the tuned subset (see the module docstring); return that subset."""
    for p in model.parameters():
        p.requires_grad_(False)
    params = list(TunedTail.modules_of(model).parameters())
    for p in params:
        p.requires_grad_(True)
    return params


def encode(tokenizer: Any, prompts: list[str]) -> dict[str, torch.Tensor]:
    """Left-padded ids, attention mask and the position ids that skip the padding."""
    ids = [tokenizer.encode(p, add_special_tokens=False) for p in prompts]
    width = max(len(i) for i in ids)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    input_ids = torch.tensor([[pad] * (width - len(i)) + i for i in ids])
    mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i in ids])
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    return {"input_ids": input_ids, "attention_mask": mask, "position_ids": positions}


class _StopAfterCaptureError(Exception):
    """Raised by the capture hook: nothing after the last block's input is needed."""


@dataclass
class CachedBatch:
    """What the tuned weights cannot change, for one set of statements.

    ``hidden``/``normed``: the last position's hidden state entering the last block and its
    input-normed copy (B, D); ``keys``/``values``: the last block's keys (after RoPE) and values
    at every position, zero at padding (B, kv_heads, T, head_dim); ``key_mask``: (B, T), True
    where a key is a real token; ``cos``/``sin``: RoPE at the last position; ``labels``: 0 for
    a true statement, 1 for a false one.
    """

    hidden: torch.Tensor
    normed: torch.Tensor
    keys: torch.Tensor
    values: torch.Tensor
    key_mask: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor
    labels: torch.Tensor


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


@torch.no_grad()
def cache_statements(
    model: Any,
    tokenizer: Any,
    rows: list[tuple[int, int]],
    words: tuple[str, str],
    batch_size: int = 32,
) -> CachedBatch:
    """Run the frozen layers once and keep what the last block's tuned weights consume."""
    prefix = few_shot_prefix(words)
    block = model.model.layers[-1]
    attn = block.self_attn
    captured: dict[str, Any] = {}

    def hook(_module: Any, args: tuple, kwargs: dict) -> None:
        captured["hidden"] = args[0] if args else kwargs["hidden_states"]
        captured["rope"] = kwargs["position_embeddings"]
        raise _StopAfterCaptureError

    parts: list[CachedBatch] = []
    handle = block.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        for i in range(0, len(rows), batch_size):
            chunk = rows[i : i + batch_size]
            enc = encode(tokenizer, [prefix + statement(*r) for r in chunk])
            with contextlib.suppress(_StopAfterCaptureError):
                model.model(**enc, use_cache=False)
            parts.append(_cache_chunk(block, attn, captured, enc["attention_mask"], chunk))
    finally:
        handle.remove()
    return _concat(parts)


def _cache_chunk(block: Any, attn: Any, captured: dict, mask: torch.Tensor, rows: list) -> Any:
    hidden = captured["hidden"]
    cos, sin = captured["rope"]
    normed = block.input_layernorm(hidden)
    shape = (*hidden.shape[:-1], -1, attn.head_dim)
    keys = attn.k_proj(normed).view(shape).transpose(1, 2)
    values = attn.v_proj(normed).view(shape).transpose(1, 2)
    keys = keys * cos.unsqueeze(1) + rotate_half(keys) * sin.unsqueeze(1)
    real = mask.bool()
    keys = torch.where(real[:, None, :, None], keys, 0.0)
    values = torch.where(real[:, None, :, None], values, 0.0)
    labels = torch.tensor([0 if is_true(r) else 1 for r in rows])
    return CachedBatch(
        hidden[:, -1], normed[:, -1], keys, values, real, cos[:, -1], sin[:, -1], labels
    )


def _concat(parts: list[CachedBatch]) -> CachedBatch:
    width = max(p.keys.shape[2] for p in parts)

    def left_pad(t: torch.Tensor, dim: int) -> torch.Tensor:
        pad = [0, 0] * (t.dim() - 1 - dim) + [width - t.shape[dim], 0]
        return torch.nn.functional.pad(t, pad)

    return CachedBatch(
        hidden=torch.cat([p.hidden for p in parts]),
        normed=torch.cat([p.normed for p in parts]),
        keys=torch.cat([left_pad(p.keys, 2) for p in parts]),
        values=torch.cat([left_pad(p.values, 2) for p in parts]),
        key_mask=torch.cat([left_pad(p.key_mask, 1) for p in parts]),
        cos=torch.cat([p.cos for p in parts]),
        sin=torch.cat([p.sin for p in parts]),
        labels=torch.cat([p.labels for p in parts]),
    )


class TunedTail(torch.nn.Module):
    """The last position's path through the tuned weights to the two verbalizer logits.

    Its parameters are exactly the tuned subset (shared with the model, not copied).
    """

    def __init__(self, model: Any, verbalizers: list[int]) -> None:
        super().__init__()
        self.tuned = self.modules_of(model)
        block = model.model.layers[-1]
        self.heads = block.self_attn.config.num_attention_heads
        self.head_dim = block.self_attn.head_dim
        self.scaling = block.self_attn.scaling
        # frozen modules the tuned ones feed or are fed by; a tuple keeps them out of parameters()
        self.frozen = (block.self_attn.q_proj, block.self_attn.o_proj, block.mlp)
        # the tied head's verbalizer rows: frozen (the embedding is not tuned)
        self.register_buffer("head_rows", model.lm_head.weight[verbalizers].detach().clone())

    @staticmethod
    def modules_of(model: Any) -> torch.nn.ModuleDict:
        block = model.model.layers[-1]
        return torch.nn.ModuleDict(
            {
                "post_attention_layernorm": block.post_attention_layernorm,
                "down_proj": block.mlp.down_proj,
                "norm": model.model.norm,
            }
        )

    def forward(self, batch: CachedBatch) -> torch.Tensor:
        """Verbalizer logits (B, 2)."""
        t = self.tuned
        n = batch.hidden.shape[0]
        q_proj, o_proj, mlp = self.frozen
        q = q_proj(batch.normed).view(n, self.heads, self.head_dim)
        q = q * batch.cos[:, None] + rotate_half(q) * batch.sin[:, None]
        kv_heads = batch.keys.shape[1]
        q = q.view(n, kv_heads, self.heads // kv_heads, self.head_dim)
        scores = torch.einsum("bkgd,bktd->bkgt", q, batch.keys) * self.scaling
        scores = scores.masked_fill(~batch.key_mask[:, None, None, :], float("-inf"))
        weights = scores.softmax(dim=-1)
        attn = torch.einsum("bkgt,bktd->bkgd", weights, batch.values).reshape(n, -1)
        h = batch.hidden + o_proj(attn)
        x = t["post_attention_layernorm"](h)
        h = h + t["down_proj"](mlp.act_fn(mlp.gate_proj(x)) * mlp.up_proj(x))
        return t["norm"](h) @ self.head_rows.T

    def loss(self, batch: CachedBatch) -> torch.Tensor:
        """Mean cross-entropy of the verbalizer logits (the training loss)."""
        return torch.nn.functional.cross_entropy(self(batch), batch.labels)

    @torch.no_grad()
    def accuracy(self, batch: CachedBatch) -> float:
        return float((self(batch).argmax(-1) == batch.labels).float().mean())
