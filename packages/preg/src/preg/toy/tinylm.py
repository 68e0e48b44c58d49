"""A tiny character-level causal transformer (with a KV cache) and its deterministic training."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path as FsPath
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as nnf

from methodkit.torch import generator as seeded_generator

from .arith import VOCAB, make_problem

__all__ = ["CharGPT", "CharGPTConfig", "train_tiny_lm"]

Cache = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class CharGPTConfig:
    """Model size: vocabulary, context, width, depth, heads."""

    vocab_size: int = len(VOCAB)
    context: int = 96
    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 4


class _Block(nn.Module):
    def __init__(self, cfg: CharGPTConfig) -> None:
        super().__init__()
        self.h = cfg.n_heads
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model),
            nn.GELU(),
            nn.Linear(4 * cfg.d_model, cfg.d_model),
        )

    def forward(
        self, x: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
        if kv is not None:
            k = torch.cat([kv[0], k], dim=2)
            v = torch.cat([kv[1], v], dim=2)
        causal = kv is None and t > 1
        if kv is not None and t > 1:
            raise ValueError("with a cache, feed one token at a time")
        y = nnf.scaled_dot_product_attention(q, k, v, is_causal=causal)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        x = x + self.mlp(self.ln2(x))
        return x, (k, v)


class CharGPT(nn.Module):
    """Character-level causal transformer (pre-LN GPT) with an optional KV cache.

    Args:
        config: sizes.
    """

    def __init__(self, config: CharGPTConfig | None = None) -> None:
        super().__init__()
        self.config = config or CharGPTConfig()
        c = self.config
        self.tok = nn.Embedding(c.vocab_size, c.d_model)
        self.pos = nn.Embedding(c.context, c.d_model)
        self.blocks = nn.ModuleList(_Block(c) for _ in range(c.n_layers))
        self.ln = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size)

    def forward(self, idx: torch.Tensor, cache: Cache | None = None) -> tuple[torch.Tensor, Cache]:
        """Logits ``(B, T, V)`` and the updated cache."""
        offset = 0 if cache is None else cache[0][0].shape[2]
        t = idx.shape[1]
        if offset + t > self.config.context:
            raise ValueError(f"sequence length {offset + t} exceeds context {self.config.context}")
        pos = torch.arange(offset, offset + t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)[None]
        new: Cache = []
        for i, blk in enumerate(self.blocks):
            x, kv = blk(x, None if cache is None else cache[i])
            new.append(kv)
        return self.head(self.ln(x)), new

    def reset_parameters(self, generator: torch.Generator) -> None:
        """Deterministic GPT-style init from ``generator``."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.ndim >= 2:
                    p.normal_(0.0, 0.02, generator=generator)
                elif "ln" in name and name.endswith("weight"):
                    p.fill_(1.0)
                else:
                    p.zero_()


def _batch(rng: np.random.Generator, n: int, steps: int, width: int) -> tuple[Any, Any]:
    stoi = {ch: i for i, ch in enumerate(VOCAB)}
    x = np.full((n, width), stoi["."], dtype=np.int64)
    mask = np.zeros((n, width), dtype=bool)
    for b in range(n):
        pr = make_problem(rng, steps)
        s = pr.prompt + pr.completion
        x[b, : len(s)] = [stoi[c] for c in s]
        mask[b, len(pr.prompt) - 1 : len(s) - 1] = True  # predict the completion only
    return torch.from_numpy(x), torch.from_numpy(mask)


def train_tiny_lm(
    steps: int = 800,
    seed: int = 0,
    cache_dir: str | FsPath | None = None,
    *,
    batch_size: int = 32,
    lr: float = 3e-3,
    warmup: int = 50,
    problem_steps: int = 4,
    config: CharGPTConfig | None = None,
    progress: bool | None = None,
) -> CharGPT:
    """Train :class:`CharGPT` on freshly generated problems (loss on the completion only).

    AdamW with linear warm-up and cosine decay; deterministic for a given seed and thread count.
    When ``cache_dir`` is given the weights are cached there under a hash of the configuration.

    Raises:
        ValueError: ``steps < 1`` or ``batch_size < 1``.
    """
    from methodkit import progress as _progress

    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps and batch_size must be >= 1, got {steps}, {batch_size}")
    cfg = config or CharGPTConfig()
    key = dict(
        steps=steps,
        seed=seed,
        batch=batch_size,
        lr=lr,
        warmup=warmup,
        problem_steps=problem_steps,
        cfg=asdict(cfg),
        v=1,
    )
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    model = CharGPT(cfg)
    file = None if cache_dir is None else FsPath(cache_dir) / f"chargpt-{digest}.pt"
    if file is not None and file.is_file():
        model.load_state_dict(torch.load(file, weights_only=True))
        return model.eval()
    model.reset_parameters(seeded_generator(seed))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    rng = np.random.default_rng(seed)
    width = 12 + 10 * problem_steps + 6
    model.train()
    for it in _progress(range(steps), progress, desc="train tiny LM"):
        scale = min(1.0, (it + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * it / steps))
        for g in opt.param_groups:
            g["lr"] = lr * scale
        x, mask = _batch(rng, batch_size, problem_steps, width)
        logits, _ = model(x[:, :-1])
        loss = nnf.cross_entropy(logits[mask[:, :-1]], x[:, 1:][mask[:, :-1]])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    model.eval()
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), file)
    return model
