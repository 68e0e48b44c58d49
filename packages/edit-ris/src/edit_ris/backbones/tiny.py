"""TinyEditor: a ~0.4 M-parameter instruction editor trained from scratch (synthetic stand-in).

Pixel-unshuffle (2x) replaces the VAE; a small UNet at 16 x 16 and 8 x 8 with self- and
cross-attention at both resolutions denoises an x0-parametrised cosine-schedule diffusion
conditioned, InstructPix2Pix-style, on the source image latent concatenated on channels and on
the instruction embedded per word (token embedding + position, no contextualising encoder: a
bidirectional text encoder spreads every word over the whole instruction and word-level
cross-attention stops localising). It is trained on (source, instruction, edited) triplets,
never on masks. The tokenizer lives in :mod:`~edit_ris.backbones.word_tokenizer`, the training
loop in :mod:`~edit_ris.backbones.tiny_training`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as nnf

from edit_ris.backbones.base import Capture, CaptureSpec, LayerInfo, TokenBatch
from edit_ris.backbones.word_tokenizer import WordTokenizer
from methodkit.checks import check_int

__all__ = ["TinyEditor", "WordTokenizer", "cosine_alphas_cumprod", "seeded_init_"]


def cosine_alphas_cumprod(num_train_timesteps: int = 1000, s: float = 0.008) -> torch.Tensor:
    """Nichol & Dhariwal cosine schedule, clipped to (0, 0.9999]; index t = 0 .. T-1."""
    t = torch.arange(num_train_timesteps + 1, dtype=torch.float64) / num_train_timesteps
    f = torch.cos((t + s) / (1 + s) * math.pi / 2) ** 2
    ab = (f / f[0])[1:]
    return ab.clamp(1e-5, 0.9999).float()


class _Attention(nn.Module):
    """Multi-head attention with an explicit softmax, so probabilities can be recorded."""

    def __init__(self, dim: int, ctx_dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(ctx_dim, dim, bias=False)
        self.v = nn.Linear(ctx_dim, dim, bias=False)
        self.o = nn.Linear(dim, dim)

    def forward(
        self, x: torch.Tensor, ctx: torch.Tensor, mask: torch.Tensor | None, keep: bool
    ) -> Any:
        b, n, d = x.shape
        h = self.heads
        q = self.q(x).view(b, n, h, d // h).transpose(1, 2)
        k = self.k(ctx).view(b, ctx.shape[1], h, d // h).transpose(1, 2)
        v = self.v(ctx).view(b, ctx.shape[1], h, d // h).transpose(1, 2)
        m = None if mask is None else mask[:, None, None, :]
        if not keep:  # fused kernel when nothing is recorded (same maths)
            out = nnf.scaled_dot_product_attention(q, k, v, attn_mask=m)
            return self.o(out.transpose(1, 2).reshape(b, n, d)), None
        scores = (q * (d // h) ** -0.5) @ k.transpose(-1, -2)
        if m is not None:
            scores = scores.masked_fill(~m, float("-inf"))
        probs = scores.softmax(-1)  # (b, h, n, L): the explicit softmax that is recorded
        out = (probs @ v).transpose(1, 2).reshape(b, n, d)
        return self.o(out), probs


class _AttnBlock(nn.Module):
    def __init__(self, name: str, dim: int, ctx_dim: int, heads: int | None = None) -> None:
        super().__init__()
        heads = heads if heads is not None else (1 if dim <= 32 else 2)  # CPU cost: see README
        self.name = name
        self.norm1 = nn.GroupNorm(8, dim)
        self.self_attn = _Attention(dim, dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.cross_attn = _Attention(dim, ctx_dim, heads)
        self.norm3 = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: Any, ctx: Any, ctx_mask: Any, store: Any) -> Any:
        b, c, hh, ww = x.shape
        tokens = self.norm1(x).flatten(2).transpose(1, 2)
        spec = store[0] if store is not None else None
        keep_self = spec is not None and spec.wants("self_attn", self.name)
        keep_cross = spec is not None and spec.wants("cross_attn", self.name)
        y, p_self = self.self_attn(tokens, tokens, None, keep_self)
        z = x.flatten(2).transpose(1, 2) + y
        y, p_cross = self.cross_attn(self.norm2(z), ctx, ctx_mask, keep_cross)
        z = z + y
        z = z + self.ff(self.norm3(z))
        if keep_cross:
            store[1].cross_attn[self.name] = p_cross
        if keep_self:
            store[1].self_attn[self.name] = p_self.mean(1)
        return z.transpose(1, 2).reshape(b, c, hh, ww)


class _ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, tdim: int) -> None:
        super().__init__()
        self.n1 = nn.GroupNorm(8, cin)
        self.c1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.t = nn.Linear(tdim, cout)
        self.n2 = nn.GroupNorm(8, cout)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: Any, temb: Any) -> Any:
        h = self.c1(nnf.silu(self.n1(x))) + self.t(temb)[:, :, None, None]
        h = self.c2(nnf.silu(self.n2(h)))
        return h + self.skip(x)


def _timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([args.sin(), args.cos()], dim=-1)


def _check_config(
    channels: Any, text_dim: Any, max_length: Any, big_t: Any, n_inference: Any
) -> None:
    chans = tuple(channels) if isinstance(channels, (list, tuple)) else ()
    if len(chans) != 2 or any(
        isinstance(c, bool) or not isinstance(c, int) or c < 8 or c % 8 for c in chans
    ):
        raise ValueError(
            f"channels must be two positive multiples of 8 (GroupNorm uses 8 groups), "
            f"got {channels!r}"
        )
    check_int("text_dim", text_dim, low=1)
    check_int("max_length", max_length, low=2)
    check_int("num_train_timesteps", big_t, low=2)
    check_int("num_inference_steps", n_inference, low=1)
    if n_inference > big_t:
        raise ValueError(
            f"num_inference_steps must be <= num_train_timesteps={big_t}, got {n_inference}"
        )


def seeded_init_(model: nn.Module, generator: torch.Generator, after: dict | None = None) -> None:
    """Re-draw PyTorch's default initialisation of ``model`` from ``generator``, in place.

    Linear and Conv2d layers get ``kaiming_uniform_(a=sqrt(5))`` weights and
    ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` biases, embeddings ``N(0, 1)``, norms keep ones and
    zeros; modules are visited in registration order, so for a model whose constructor draws
    nothing else the result equals ``torch.manual_seed(s); Model(...)`` bit for bit, without
    touching the global RNG. ``after`` maps a module to a callable run right after it is
    initialised (a parameter drawn in the constructor between two modules).
    """
    after = after or {}
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                nn.init.kaiming_uniform_(m.weight, a=math.sqrt(5), generator=generator)
                if m.bias is not None:
                    fan_in = m.weight[0].numel()
                    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
                    nn.init.uniform_(m.bias, -bound, bound, generator=generator)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, generator=generator)
            if id(m) in after:
                after[id(m)]()


class TinyEditor(nn.Module):
    """A tiny InstructPix2Pix-style editor implementing :class:`EditingBackbone`.

    Args:
        vocab: Word vocabulary of the instruction tokenizer.
        channels: Widths at 16 x 16 and 8 x 8 latent resolution.
        text_dim: Token-embedding width.
        max_length: Tokenizer length (BOS included).
        num_train_timesteps: T of the cosine schedule.
        num_inference_steps: Default inference schedule length (its first step is t0).
        seed: ``None``: PyTorch's default initialisation from the global RNG (as any
            ``nn.Module``); an int: the same initialisation drawn from a private
            ``torch.Generator`` seeded with it (deterministic; the global RNG is untouched).

    Raises:
        ValueError: For widths that are not positive multiples of 8 (GroupNorm uses 8
            groups), ``text_dim < 1``, ``max_length < 2``, ``num_train_timesteps < 2`` or
            ``num_inference_steps`` outside [1, num_train_timesteps].
    """

    downsample_factor = 2
    size_multiple = 4  # pixel-unshuffle 2 x one stride-2 level
    prediction_type = "sample"  # x0-parametrisation
    alphas_cumprod: torch.Tensor  # a buffer (registered in __init__)

    def __init__(
        self,
        vocab: Sequence[str],
        channels: tuple[int, int] = (32, 64),
        text_dim: int = 64,
        max_length: int = 12,
        num_train_timesteps: int = 1000,
        num_inference_steps: int = 20,
        seed: int | None = None,
    ) -> None:
        super().__init__()
        _check_config(channels, text_dim, max_length, num_train_timesteps, num_inference_steps)
        self.config = {
            "vocab": list(vocab),
            "channels": tuple(channels),
            "text_dim": text_dim,
            "max_length": max_length,
            "num_train_timesteps": num_train_timesteps,
            "num_inference_steps": num_inference_steps,
        }
        self.tokenizer = WordTokenizer(vocab, max_length)
        self.num_train_timesteps = num_train_timesteps
        self.num_inference_steps = num_inference_steps
        self.register_buffer("alphas_cumprod", cosine_alphas_cumprod(num_train_timesteps))
        if seed is None:
            self._build(channels, text_dim, max_length)
        else:  # draw from a private generator; the global RNG state is restored afterwards
            g = torch.Generator().manual_seed(check_int("seed", seed, low=0))
            with torch.random.fork_rng(devices=[]):
                self._build(channels, text_dim, max_length)

            def draw_pos() -> None:  # drawn right after the embedding, as in the constructor
                self.pos.copy_(torch.randn(self.pos.shape, generator=g) * 0.02)

            seeded_init_(self, g, after={id(self.tok): draw_pos})

    def _build(self, channels: tuple[int, int], text_dim: int, max_length: int) -> None:
        c1, c2 = channels
        tdim = 64
        self.tok = nn.Embedding(len(self.tokenizer.vocab), text_dim)
        self.pos = nn.Parameter(torch.randn(max_length, text_dim) * 0.02)
        self.temb = nn.Sequential(nn.Linear(tdim, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
        lat = 3 * self.downsample_factor**2
        self.conv_in = nn.Conv2d(2 * lat, c1, 3, padding=1)
        self.res_d16 = _ResBlock(c1, c1, tdim)
        self.att_d16 = _AttnBlock("down16", c1, text_dim)
        self.down = nn.Conv2d(c1, c2, 3, stride=2, padding=1)
        self.res_d8 = _ResBlock(c2, c2, tdim)
        self.att_d8 = _AttnBlock("down8", c2, text_dim)
        self.res_m8 = _ResBlock(c2, c2, tdim)
        self.att_m8 = _AttnBlock("mid8", c2, text_dim)
        self.res_u8 = _ResBlock(2 * c2, c2, tdim)
        self.att_u8 = _AttnBlock("up8", c2, text_dim)
        self.up = nn.Conv2d(c2, c1, 3, padding=1)
        self.res_u16 = _ResBlock(2 * c1, c1, tdim)
        self.att_u16 = _AttnBlock("up16", c1, text_dim)
        self.out = nn.Sequential(nn.GroupNorm(8, c1), nn.SiLU(), nn.Conv2d(c1, lat, 3, padding=1))

    # -- the denoiser -------------------------------------------------------------------
    def denoise(
        self, x_t: Any, image_latent: Any, t: Any, ids: Any, token_mask: Any, store: Any = None
    ) -> torch.Tensor:
        """x0 estimate from ``cat([x_t, image_latent])``, timestep ``t`` (B,) and token ids."""
        ctx = self.tok(ids) + self.pos[: ids.shape[1]]
        temb = self.temb(_timestep_embedding(t, 64))
        h = self.conv_in(torch.cat([x_t, image_latent], dim=1))
        s16 = self.att_d16(self.res_d16(h, temb), ctx, token_mask, store)
        h = self.down(s16)
        s8 = self.att_d8(self.res_d8(h, temb), ctx, token_mask, store)
        h = self.att_m8(self.res_m8(s8, temb), ctx, token_mask, store)
        h = self.att_u8(self.res_u8(torch.cat([h, s8], 1), temb), ctx, token_mask, store)
        if store is not None and store[0].wants("features", "up8"):
            store[1].features["up8"] = h
        h = self.up(nnf.interpolate(h, scale_factor=2.0, mode="nearest"))
        h = self.att_u16(self.res_u16(torch.cat([h, s16], 1), temb), ctx, token_mask, store)
        if store is not None and store[0].wants("features", "up16"):
            store[1].features["up16"] = h
        return self.out(h)

    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """Images in [0, 1] -> latents (pixel-unshuffle of ``2 x - 1``)."""
        return nnf.pixel_unshuffle(images * 2.0 - 1.0, self.downsample_factor)

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents -> images in [0, 1]."""
        return (nnf.pixel_shuffle(latents, self.downsample_factor) + 1.0).clamp(0.0, 2.0) / 2.0

    # -- EditingBackbone ----------------------------------------------------------------
    def tokenize(self, texts: Sequence[str]) -> TokenBatch:
        """Word-level tokens with character offsets."""
        return self.tokenizer(texts)

    def timesteps(self, num_inference_steps: int) -> list[int]:
        """Evenly spaced inference timesteps from T - 1 down to 0."""
        if not isinstance(num_inference_steps, int) or num_inference_steps < 1:
            raise ValueError(
                f"num_inference_steps must be a positive int, got {num_inference_steps}"
            )
        grid = np.linspace(self.num_train_timesteps - 1, 0, num_inference_steps)
        return [int(round(v)) for v in grid]  # noqa: RUF046 (numpy scalars)

    def earliest_timestep(self) -> int:
        """First timestep of the default inference schedule (T - 1)."""
        return self.timesteps(self.num_inference_steps)[0]

    def layer_info(self) -> list[LayerInfo]:
        """Attention layers at 16 and 8, decoder features at 8 and 16 (latent cells)."""
        res = {"down16": 16, "down8": 8, "mid8": 8, "up8": 8, "up16": 16}
        out = [LayerInfo(n, "cross_attn", r) for n, r in res.items()]
        out += [LayerInfo(n, "self_attn", r) for n, r in res.items()]
        return [*out, LayerInfo("up8", "features", 8), LayerInfo("up16", "features", 16)]

    def _noise(self, shape: Any, seed: int, device: Any) -> torch.Tensor:
        g = torch.Generator().manual_seed(int(seed))
        return torch.randn(shape, generator=g).to(device)

    def _x0_and_eps(self, x_t: Any, x0: Any, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        ab = self.alphas_cumprod[t]
        eps = (x_t - ab.sqrt() * x0) / (1.0 - ab).sqrt()
        return x0, eps

    @torch.no_grad()
    def forward_capture(
        self,
        images: torch.Tensor,
        instructions: Sequence[str],
        t: int,
        seed: int,
        capture: CaptureSpec | None = None,
    ) -> Capture:
        """One conditional call at ``t``: x_t = seeded N(0, I) (init sigma 1), image latent cat.

        Raises:
            ValueError: If ``t`` is not an int timestep in [0, num_train_timesteps).
        """
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
            raise ValueError(f"t must be an int timestep, got {t!r}")
        if not 0 <= int(t) < self.num_train_timesteps:
            raise ValueError(f"timestep {t} is not in the schedule [0, {self.num_train_timesteps})")
        tb = self.tokenize(instructions)
        dev = images.device
        lat = self.encode(images.float())
        x_t = self._noise(lat.shape, seed, dev)
        cap = Capture(token_mask=tb.attention_mask.to(dev), timestep=int(t))
        store = (capture, cap) if capture is not None else None
        tt = torch.full((lat.shape[0],), int(t), device=dev)
        x0 = self.denoise(x_t, lat, tt, tb.ids.to(dev), tb.attention_mask.to(dev), store)
        cap.x0, cap.eps = self._x0_and_eps(x_t, x0, int(t))
        return cap

    @torch.no_grad()
    def edit(
        self,
        images: torch.Tensor,
        instructions: Sequence[str],
        num_inference_steps: int = 20,
        seed: int = 0,
    ) -> torch.Tensor:
        """The full edit: deterministic DDIM over ``num_inference_steps`` steps."""
        tb = self.tokenize(instructions)
        dev = images.device
        lat = self.encode(images.float())
        x = self._noise(lat.shape, seed, dev)
        ts = self.timesteps(num_inference_steps)
        ids, mask = tb.ids.to(dev), tb.attention_mask.to(dev)
        x0 = x
        for i, t in enumerate(ts):
            x0 = self.denoise(x, lat, torch.full((lat.shape[0],), t, device=dev), ids, mask)
            _, eps = self._x0_and_eps(x, x0, t)
            if i + 1 < len(ts):
                ab = self.alphas_cumprod[ts[i + 1]]
                x = ab.sqrt() * x0 + (1.0 - ab).sqrt() * eps
        return self.decode(x0)

    # -- persistence ----------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Save config and weights to ``path`` (torch format)."""
        torch.save({"config": self.config, "state": self.state_dict()}, path)

    @classmethod
    def load(cls, path: str | Path) -> TinyEditor:
        """Load a model saved by :meth:`save`."""
        blob = torch.load(path, map_location="cpu", weights_only=False)
        model = cls(**blob["config"])
        model.load_state_dict(blob["state"])
        return model.eval()
