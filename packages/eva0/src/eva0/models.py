"""A tiny ViT with timm's ``VisionTransformer`` interface, and a prompt-inserting wrapper (FOA).

:class:`TinyViT` is a hand-written ViT exposing the attributes timm's ``VisionTransformer``
has (``patch_embed``, ``_pos_embed``, ``blocks``, ``norm``, ``head``), so
:class:`PromptedViT` and :class:`eva0.EVA0` treat both alike. :class:`TinyViT` is a
dependency-free stand-in; :func:`timm_vit` builds the same configuration as a real timm
``VisionTransformer`` (extra ``eva0[timm]``), which is what the benchmark trains.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["PromptedViT", "TinyViT", "timm_vit", "tiny_vit"]


class _PatchEmbed(nn.Module):
    def __init__(self, img_size: int, patch_size: int, in_chans: int, dim: int) -> None:
        super().__init__()
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Conv2d(in_chans, dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)  # (B, N, D)


class _Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    """Pre-norm ViT with a class token (timm ``VisionTransformer`` attribute names).

    Args:
        img_size: Input height = width.
        patch_size: Patch side (must divide ``img_size``).
        in_chans: Input channels.
        num_classes: Output classes.
        embed_dim: Token width.
        depth: Number of blocks.
        num_heads: Attention heads.
        mlp_ratio: MLP hidden width / ``embed_dim``.
        generator: Optional generator for the initial weights.

    Raises:
        ValueError: If ``patch_size`` does not divide ``img_size``.
    """

    def __init__(
        self,
        img_size: int = 16,
        patch_size: int = 4,
        in_chans: int = 1,
        num_classes: int = 10,
        embed_dim: int = 64,
        depth: int = 4,
        num_heads: int = 4,
        mlp_ratio: float = 2.0,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if img_size % patch_size:
            raise ValueError(f"patch_size {patch_size} must divide img_size {img_size}")
        self.patch_embed = _PatchEmbed(img_size, patch_size, in_chans, embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, embed_dim))
        self.blocks = nn.Sequential(
            *[_Block(embed_dim, num_heads, mlp_ratio) for _ in range(depth)]
        )
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes)
        self.embed_dim = embed_dim
        self.patch_size = patch_size
        with torch.no_grad():
            self.pos_embed.normal_(0, 0.02, generator=generator)
            self.cls_token.normal_(0, 1e-6, generator=generator)
            for m in self.modules():
                if isinstance(m, nn.Linear | nn.Conv2d):
                    fan_in = m.weight[0].numel()
                    m.weight.uniform_(
                        -1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in), generator=generator
                    )
                    if m.bias is not None:
                        m.bias.zero_()
                elif isinstance(m, nn.MultiheadAttention):
                    bound = math.sqrt(6 / (2 * embed_dim))
                    m.in_proj_weight.uniform_(-bound, bound, generator=generator)

    def _pos_embed(self, x: torch.Tensor) -> torch.Tensor:
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        return torch.cat([cls, x], dim=1) + self.pos_embed

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens after the final norm, shape (B, 1 + N, D)."""
        return self.norm(self.blocks(self._pos_embed(self.patch_embed(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits, shape (B, num_classes)."""
        return self.head(self.forward_features(x)[:, 0])


def tiny_vit(
    img_size: int = 16,
    patch_size: int = 4,
    in_chans: int = 1,
    num_classes: int = 10,
    *,
    embed_dim: int = 64,
    depth: int = 4,
    num_heads: int = 4,
    mlp_ratio: float = 2.0,
    generator: torch.Generator | None = None,
) -> TinyViT:
    """The spec's benchmark ViT (no weights), as a :class:`TinyViT`."""
    return TinyViT(
        img_size,
        patch_size,
        in_chans,
        num_classes,
        embed_dim,
        depth,
        num_heads,
        mlp_ratio,
        generator,
    )


def timm_vit(
    img_size: int = 16,
    patch_size: int = 4,
    in_chans: int = 1,
    num_classes: int = 10,
    *,
    embed_dim: int = 64,
    depth: int = 4,
    num_heads: int = 4,
    mlp_ratio: float = 2.0,
) -> nn.Module:
    """The same configuration as a timm ``VisionTransformer`` built without weights.

    Raises:
        ImportError: If timm is not installed (``pip install 'eva0[timm]'``).
    """
    try:
        from timm.models.vision_transformer import VisionTransformer
    except ImportError as exc:
        raise ImportError("timm_vit needs timm: pip install 'eva0[timm]'") from exc
    return VisionTransformer(
        img_size=img_size,
        patch_size=patch_size,
        in_chans=in_chans,
        num_classes=num_classes,
        embed_dim=embed_dim,
        depth=depth,
        num_heads=num_heads,
        mlp_ratio=mlp_ratio,
    )


def _is_vit(vit: nn.Module) -> bool:
    names = ("patch_embed", "norm", "head")
    parts = all(isinstance(getattr(vit, a, None), nn.Module) for a in names)
    blocks = isinstance(getattr(vit, "blocks", None), nn.Sequential | nn.ModuleList)
    return parts and blocks and callable(getattr(vit, "_pos_embed", None))


class PromptedViT(nn.Module):
    """Run a ViT with prompt tokens inserted right after the class token (FOA).

    ``forward(x, prompts, shift)`` returns ``(logits, cls_per_block)`` where
    ``cls_per_block`` is a list of the class-token features after every block (B, D), and
    ``shift`` (D,) is added to the final class feature before the head (activation shifting).

    Args:
        vit: A timm ``VisionTransformer`` or :class:`TinyViT`.
        n_prompts: Number of prompt tokens (>= 0).

    Raises:
        TypeError: If ``vit`` lacks the VisionTransformer interface.
        ValueError: If ``n_prompts`` < 0.
    """

    def __init__(self, vit: nn.Module, n_prompts: int) -> None:
        super().__init__()
        if not isinstance(vit, nn.Module) or not _is_vit(vit):
            raise TypeError(
                "PromptedViT/FOA needs a timm VisionTransformer-like model (patch_embed, "
                f"_pos_embed, blocks, norm, head), got {type(vit).__name__}"
            )
        if n_prompts < 0:
            raise ValueError(f"n_prompts must be >= 0, got {n_prompts}")
        self.vit = vit
        self.n_prompts = n_prompts
        self.embed_dim = int(vit.get_parameter("pos_embed").shape[-1])

    def forward(
        self,
        x: torch.Tensor,
        prompts: torch.Tensor | None = None,
        shift: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Logits and per-block class features (see the class docstring)."""
        vit = self.vit
        pos_embed = getattr(vit, "_pos_embed", None)  # a method (class token + positions)
        blocks = vit.get_submodule("blocks")
        if not callable(pos_embed) or not isinstance(blocks, nn.Sequential | nn.ModuleList):
            raise TypeError(f"{type(vit).__name__} lost its _pos_embed or blocks after __init__")
        h = pos_embed(vit.get_submodule("patch_embed")(x))
        if prompts is not None and prompts.numel():
            p = prompts.reshape(1, -1, self.embed_dim).expand(h.shape[0], -1, -1).to(h.dtype)
            h = torch.cat([h[:, :1], p, h[:, 1:]], dim=1)
        for extra in ("patch_drop", "norm_pre"):
            if hasattr(vit, extra):
                h = getattr(vit, extra)(h)
        feats = []
        for blk in blocks:
            h = blk(h)
            feats.append(h[:, 0])
        cls = vit.get_submodule("norm")(h)[:, 0]
        if hasattr(vit, "fc_norm"):
            cls = vit.get_submodule("fc_norm")(cls)
        if shift is not None:
            cls = cls + shift
        return vit.get_submodule("head")(cls), feats
