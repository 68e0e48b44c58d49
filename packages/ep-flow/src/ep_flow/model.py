"""Axial grid transformer over the site x species grid (*inferred* architecture).

Equivariant to permutations of sites and of species columns: entry tokens are
``phi(Z[i, k]) + site_i + species_k``; layers alternate attention along species (within a site)
and along sites (within a species); lattice and time condition every block through adaLN.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["AxialGridTransformer"]

MAX_Z = 94


def _mlp(i: int, h: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, h), nn.SiLU(), nn.Linear(h, o))


class _AdaLN(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width, elementwise_affine=False)
        self.mod = nn.Linear(width, 3 * width)
        nn.init.zeros_(self.mod.weight)
        nn.init.zeros_(self.mod.bias)

    def forward(self, x: Tensor, cond: Tensor) -> tuple[Tensor, Tensor]:
        shift, scale, gate = self.mod(cond)[:, None, None].chunk(3, dim=-1)
        return self.norm(x) * (1 + scale) + shift, gate


class _Attention(nn.Module):
    """Multi-head self-attention over padded sequences (one fused qkv projection).

    Same maths as ``nn.MultiheadAttention`` with a key padding mask, with fewer kernels: a
    boolean mask goes straight to ``scaled_dot_product_attention`` (no float-mask merging).
    """

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x: Tensor, keep: Tensor) -> Tensor:
        # x: (S, L, W) sequences; keep: (S, L) True = a real key
        S, L, W = x.shape
        q, k, v = self.qkv(x).view(S, L, 3, self.heads, W // self.heads).permute(2, 0, 3, 1, 4)
        o = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None])
        return self.out(o.transpose(1, 2).reshape(S, L, W))


class _AxialBlock(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln_s, self.ln_n, self.ln_f = _AdaLN(width), _AdaLN(width), _AdaLN(width)
        self.att_s = _Attention(width, heads)
        self.att_n = _Attention(width, heads)
        self.ff = _mlp(width, 2 * width, width)

    def forward(self, h: Tensor, cond: Tensor, rm: Tensor, cm: Tensor) -> Tensor:
        B, N, M, W = h.shape
        y, g = self.ln_s(h, cond)  # along species, within each site
        keep = cm[:, None].expand(B, N, M).reshape(B * N, M)
        h = h + g * self.att_s(y.reshape(B * N, M, W), keep).reshape(B, N, M, W)
        y, g = self.ln_n(h, cond)  # along sites, within each species
        yt = y.transpose(1, 2).reshape(B * M, N, W)
        keep = rm[:, None].expand(B, M, N).reshape(B * M, N)
        out = self.att_n(yt, keep).reshape(B, M, N, W).transpose(1, 2)
        h = h + g * out
        y, g = self.ln_f(h, cond)
        return h + g * self.ff(y)


class AxialGridTransformer(nn.Module):
    """Velocity network of EP-Flow on the ``N x M`` occupancy grid.

    ``forward(Z, frac, lattice, t, atomic_numbers, c_frac, row_mask, col_mask)`` with
    Z (B, N, M), frac (B, N, 3), lattice (B, 6) standardised, t (B,), atomic_numbers (B, M)
    (0 = vacancy), c_frac (B, M) = c_k / N, masks (B, N) / (B, M) returns
    ``(v_Z (B, N, M), v_F (B, N, 3), v_L (B, 6))``. Any module with this signature can
    replace it in :class:`ep_flow.EPFlow`.

    Args:
        width: token width. n_layers: axial blocks (species- then site-attention, then MLP).
        n_heads: attention heads. n_freq: Fourier frequencies of the fractional coordinates.
        max_z: largest atomic number with an embedding.
    """

    freqs: Tensor  # registered buffer: the Fourier frequencies

    def __init__(
        self,
        width: int = 64,
        n_layers: int = 4,
        n_heads: int = 4,
        n_freq: int = 4,
        max_z: int = MAX_Z,
    ) -> None:
        super().__init__()
        if width % n_heads:
            raise ValueError(f"width {width} must be divisible by n_heads {n_heads}")
        self.max_z = int(max_z)
        self.register_buffer("freqs", 2 * math.pi * torch.arange(1, n_freq + 1).float())
        self.phi = _mlp(1, width, width)
        self.site = _mlp(6 * n_freq, width, width)
        self.element = nn.Embedding(self.max_z + 1, width)  # index 0 = vacancy
        self.amount = _mlp(1, width, width)
        self.time = _mlp(16, width, width)
        self.lat = _mlp(6, width, width)
        self.blocks = nn.ModuleList(_AxialBlock(width, n_heads) for _ in range(n_layers))
        self.out_norm = nn.LayerNorm(width)
        self.head_z = nn.Linear(width, 1)
        self.head_f = _mlp(width, width, 3)
        self.head_l = _mlp(width, width, 6)

    def forward(
        self,
        Z: Tensor,
        frac: Tensor,
        lattice: Tensor,
        t: Tensor,
        atomic_numbers: Tensor,
        c_frac: Tensor,
        row_mask: Tensor,
        col_mask: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Velocities ``(v_Z, v_F, v_L)``; see the class docstring for the shapes."""
        dt = Z.dtype
        rm, cm = row_mask.bool(), col_mask.bool()
        ang = frac[..., None] * self.freqs.to(dt)  # (B, N, 3, F)
        four = torch.cat([ang.sin(), ang.cos()], -1).flatten(2)
        site = self.site(four)  # (B, N, W)
        zs = atomic_numbers.clamp(0, self.max_z)
        species = self.element(zs).to(dt) + self.amount(c_frac[..., None].to(dt))
        h = self.phi(Z[..., None]) + site[:, :, None] + species[:, None]
        tf = t[:, None].to(dt) * torch.arange(1, 9, device=Z.device, dtype=dt) * math.pi
        cond = self.time(torch.cat([tf.sin(), tf.cos()], -1)) + self.lat(lattice)
        for blk in self.blocks:
            h = blk(h, cond, rm, cm)
        h = self.out_norm(h)
        w = (rm[:, :, None] & cm[:, None]).to(dt)[..., None]
        v_z = self.head_z(h)[..., 0]
        row = (h * w).sum(2) / w.sum(2).clamp_min(1)  # pool over the species of each site
        grid = (h * w).sum((1, 2)) / w.sum((1, 2)).clamp_min(1)  # pool over the grid
        return v_z, self.head_f(row), self.head_l(grid)
