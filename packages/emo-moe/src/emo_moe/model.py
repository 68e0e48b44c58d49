"""A tiny MoE language model (byte level) with a standard or an EMO router in every layer."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as nnf

from emo_moe.documents import check_token_ids, doc_ids_from_eos, validate_doc_ids
from emo_moe.layers import MoEFeedForward
from emo_moe.losses import GRANULARITIES, global_load_balancing_loss, router_z_loss
from emo_moe.routing import POOL_MODES, DocumentPoolRouter, RouterOutput, TopKRouter

__all__ = ["ROUTERS", "TinyMoEConfig", "TinyMoELM"]

ROUTERS = ("topk", "emo")


def _check_int_field(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < low:
        kind = "positive" if low == 1 else f">= {low}"
        raise ValueError(f"{name} must be {kind}, got {value}")


@dataclass
class TinyMoEConfig:
    """Configuration of :class:`TinyMoELM` (defaults: the spec's small-scale model).

    ``top_k`` counts routed experts; ``num_shared`` shared experts are always active on top.

    Raises:
        TypeError: An integer field that is not an int, or a non-numeric loss weight.
        ValueError: A size that is not positive (``d_model=-1``: "d_model must be positive"),
            ``top_k > num_experts``, an unknown router, pool mode or granularity, a negative or
            NaN loss weight, ``eos_id``/``pad_id`` outside the vocabulary, or ``d_model`` not
            divisible by ``n_heads`` (checked in this order).
    """

    vocab_size: int = 258
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    max_len: int = 256
    num_experts: int = 32
    num_shared: int = 1
    top_k: int = 3
    d_expert: int = 128
    router: str = "topk"
    pool_min: int = 4
    pool_max: int = 32
    pool_eval: int = 8
    pool_mode: str = "train"
    lb_weight: float = 0.1
    z_weight: float = 0.0
    lb_granularity: str = "global"
    norm_topk_prob: bool = False
    intra_doc_attention: bool = False
    eos_id: int = 256
    pad_id: int = 257

    def __post_init__(self) -> None:
        """Check every field in order (positivity before any divisibility or cross-check)."""
        for name, low in (
            ("vocab_size", 1), ("d_model", 1), ("n_layers", 1), ("n_heads", 1),
            ("max_len", 1), ("num_experts", 1), ("num_shared", 0), ("top_k", 1),
            ("d_expert", 1), ("pool_min", 1), ("pool_max", 1), ("pool_eval", 1),
            ("eos_id", 0), ("pad_id", 0),
        ):  # fmt: skip
            _check_int_field(name, getattr(self, name), low)
        if self.top_k > self.num_experts:
            raise ValueError(f"top_k={self.top_k} must be <= num_experts={self.num_experts}")
        if self.router not in ROUTERS:
            raise ValueError(f"router must be one of {ROUTERS}, got {self.router!r}")
        if self.pool_mode not in POOL_MODES:
            raise ValueError(f"pool_mode must be one of {POOL_MODES}, got {self.pool_mode!r}")
        for name in ("lb_weight", "z_weight"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{name} must be a number, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        if self.lb_granularity not in GRANULARITIES:
            raise ValueError(
                f"lb_granularity must be one of {GRANULARITIES}, got {self.lb_granularity!r}"
            )
        for name in ("eos_id", "pad_id"):
            if getattr(self, name) >= self.vocab_size:
                raise ValueError(
                    f"{name}={getattr(self, name)} must be < vocab_size={self.vocab_size}"
                )
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields."""
        return asdict(self)


class _Attention(nn.Module):
    def __init__(self, d: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)

    def forward(self, x: torch.Tensor, doc_ids: torch.Tensor | None) -> torch.Tensor:
        B, S, d = x.shape
        q, k, v = self.qkv(x).view(B, S, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        if doc_ids is None:
            o = nnf.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # causal and inside the document only
            causal = torch.ones(S, S, dtype=torch.bool, device=x.device).tril()
            same = doc_ids.unsqueeze(2) == doc_ids.unsqueeze(1)
            o = nnf.scaled_dot_product_attention(q, k, v, attn_mask=(causal & same).unsqueeze(1))
        return self.proj(o.transpose(1, 2).reshape(B, S, d))


class _Block(nn.Module):
    def __init__(self, cfg: TinyMoEConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = _Attention(cfg.d_model, cfg.n_heads)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        args = (cfg.d_model, cfg.num_experts, cfg.top_k, cfg.num_shared, cfg.norm_topk_prob)
        router: TopKRouter
        if cfg.router == "emo":
            router = DocumentPoolRouter(
                *args,
                pool_min=cfg.pool_min,
                pool_max=cfg.pool_max,
                pool_eval=cfg.pool_eval,
                pool_mode=cfg.pool_mode,
                eos_id=cfg.eos_id,
            )
        else:
            router = TopKRouter(*args)
        self.moe = MoEFeedForward(
            cfg.d_model, cfg.d_expert, cfg.num_experts, cfg.top_k, cfg.num_shared, router=router
        )

    def forward(
        self, x: torch.Tensor, doc_ids: torch.Tensor, attn_doc_ids: torch.Tensor | None
    ) -> tuple[torch.Tensor, RouterOutput]:
        x = x + self.attn(self.ln1(x), attn_doc_ids)
        y, out = self.moe(self.ln2(x), doc_ids=doc_ids)
        return x + y, out


class TinyMoELM(nn.Module):
    """Decoder-only byte-level MoE LM: learned positions, pre-LN blocks, MoE FFN, tied head.

    ``loss = lm_loss + lb_weight * L_lb + z_weight * L_z`` with the global-batch balancing
    loss. Attention is causal over the packed row (``intra_doc_attention`` also masks it across
    documents). Document ids default to :func:`doc_ids_from_eos` with ``cfg.eos_id``.

    Example:
        >>> import torch
        >>> cfg = TinyMoEConfig(d_model=32, n_layers=1, n_heads=2, max_len=16, num_experts=8,
        ...                     top_k=2, d_expert=16, router="emo", pool_min=2, pool_max=8,
        ...                     pool_eval=4)
        >>> out = TinyMoELM(cfg)(torch.randint(0, 256, (2, 16)), labels=torch.zeros(2, 16).long())
        >>> out["logits"].shape
        torch.Size([2, 16, 258])
    """

    def __init__(self, cfg: TinyMoEConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg = cfg or TinyMoEConfig()
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear | nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    def moe_layers(self) -> list[MoEFeedForward]:
        """The MoE layer of every block, in depth order."""
        return [b.moe for b in self.blocks if isinstance(b, _Block)]  # all are (built so)

    def forward(
        self,
        input_ids: torch.Tensor,
        doc_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_router_logits: bool = False,
    ) -> dict[str, Any]:
        """Logits ``(B, S, V)``; with ``labels`` (``-100`` ignored, shifted inside) the losses."""
        cfg = self.cfg
        check_token_ids(input_ids, "input_ids")
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape (B, S), got {tuple(input_ids.shape)}")
        if input_ids.numel() == 0:
            raise ValueError(f"input_ids is empty: shape {tuple(input_ids.shape)}")
        lo, hi = int(input_ids.min()), int(input_ids.max())
        if lo < 0 or hi >= cfg.vocab_size:
            raise ValueError(
                f"input_ids must be in [0, vocab_size={cfg.vocab_size}), got values in [{lo}, {hi}]"
            )
        if labels is not None and tuple(labels.shape) != tuple(input_ids.shape):
            raise ValueError(
                f"labels must have the shape of input_ids {tuple(input_ids.shape)}, "
                f"got {tuple(labels.shape)}"
            )
        B, S = input_ids.shape
        if cfg.max_len < S:
            raise ValueError(f"sequence length {S} exceeds max_len={cfg.max_len}")
        if doc_ids is None:
            doc_ids = doc_ids_from_eos(input_ids, cfg.eos_id)
        else:
            validate_doc_ids(doc_ids, (B, S))
        pos = torch.arange(S, device=input_ids.device)
        x = self.tok_emb(input_ids) + self.pos_emb(pos)
        attn_ids = doc_ids if cfg.intra_doc_attention else None
        outs = []
        for block in self.blocks:
            x, out = block(x, doc_ids, attn_ids)
            outs.append(out)
        logits = nnf.linear(self.ln_f(x), self.tok_emb.weight)
        # per layer with its own expert count (a pruned model may keep different sizes)
        lb = torch.stack(
            [
                global_load_balancing_loss(
                    [o], o.probs.shape[-1], cfg.top_k, granularity=cfg.lb_granularity
                )
                for o in outs
            ]
        ).mean()
        aux = cfg.lb_weight * lb
        if cfg.z_weight:
            aux = aux + cfg.z_weight * router_z_loss(outs)
        lm_loss = loss = None
        if labels is not None:
            lm_loss = nnf.cross_entropy(
                logits[:, :-1].reshape(-1, cfg.vocab_size),
                labels[:, 1:].reshape(-1),
                ignore_index=-100,
            )
            loss = lm_loss + aux
        return {
            "loss": loss,
            "lm_loss": lm_loss,
            "aux_loss": aux,
            "logits": logits,
            "router_outputs": outs if output_router_logits else None,
        }
