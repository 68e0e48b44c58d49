"""Adapters for open_clip, Hugging Face CLIP/SigLIP and timm ViTs (imported lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from easylens.adapters.base import HookedAdapter, as_pair


class TimmViTAdapter(HookedAdapter):
    """A timm ``VisionTransformer`` (``.blocks``, ``.patch_embed``, ``num_prefix_tokens``).

    ``encode_image`` is ``model(images)`` (features + the model's own head).
    """

    # timm's module attributes (``patch_embed.grid_size``, ...) are plain Python values that
    # ``nn.Module.__getattr__`` types as ``Tensor | Module``: the duck-typed handle is ``Any``.
    model: Any

    def __init__(self, model: nn.Module) -> None:
        if not hasattr(model, "blocks") or not hasattr(model, "patch_embed"):
            raise TypeError(
                f"TimmViTAdapter needs a timm VisionTransformer with .blocks and .patch_embed, "
                f"got {type(model).__name__}"
            )
        self.model = model
        self.blocks = list(self.model.blocks)
        self.grid_size = as_pair(self.model.patch_embed.grid_size)
        self.num_prefix_tokens = int(getattr(model, "num_prefix_tokens", 1))
        self.image_size = as_pair(self.model.patch_embed.img_size)

    def _forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(images)


class OpenCLIPAdapter(HookedAdapter):
    """An open_clip CLIP model: ``VisionTransformer`` (``transformer.resblocks``) or a timm trunk.

    Args:
        model: ``open_clip.CLIP`` / ``CustomTextCLIP`` (e.g. BiomedCLIP).
        tokenizer: ``open_clip.get_tokenizer(...)`` for :meth:`encode_text` (optional).
    """

    # open_clip's towers are duck-typed (``encode_image``, ``visual.proj``, ``grid_size``, ...);
    # ``nn.Module.__getattr__`` would type every such attribute as ``Tensor | Module``.
    model: Any
    visual: Any

    def __init__(self, model: nn.Module, tokenizer: Any = None) -> None:
        visual = getattr(model, "visual", None)
        if visual is None:
            raise TypeError(
                f"OpenCLIPAdapter needs a model with .visual, got {type(model).__name__}"
            )
        self.model, self.visual, self.tokenizer = model, visual, tokenizer
        if hasattr(visual, "transformer") and hasattr(visual.transformer, "resblocks"):
            self.blocks = list(visual.transformer.resblocks)
            self.grid_size = as_pair(visual.grid_size)
            self.num_prefix_tokens = 1
            self.image_size = as_pair(visual.image_size)
            # open_clip < 2.24 ran its transformer sequence-first (LND)
            self.seq_first = not getattr(visual.transformer, "batch_first", False)
            self._trunk = False
        elif hasattr(visual, "trunk") and hasattr(visual.trunk, "blocks"):
            trunk = visual.trunk
            self.blocks = list(trunk.blocks)
            self.grid_size = as_pair(trunk.patch_embed.grid_size)
            self.num_prefix_tokens = int(getattr(trunk, "num_prefix_tokens", 1))
            self.image_size = as_pair(trunk.patch_embed.img_size)
            self._trunk = True
        else:
            raise TypeError(
                f"unsupported open_clip visual tower {type(visual).__name__}: expected a "
                "VisionTransformer or a timm ViT trunk"
            )

    @property
    def has_text(self) -> bool:
        """Whether a text encoder is available."""
        return self.tokenizer is not None and hasattr(self.model, "encode_text")

    @property
    def has_joint(self) -> bool:
        """Whether ``to_joint`` is available."""
        return not self._trunk

    def _forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model.encode_image(images)

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """Text embeddings in the joint space."""
        if not self.has_text:
            raise ValueError("OpenCLIPAdapter was built without a tokenizer: no text encoder")
        device = next(self.model.parameters()).device
        return self.model.encode_text(self.tokenizer(list(texts)).to(device))

    def to_joint(self, tokens: torch.Tensor) -> torch.Tensor:
        """Patch tokens into the joint space (final norm + projection)."""
        if self._trunk:
            raise ValueError("to_joint is not available for open_clip timm trunks")
        x = self.visual.ln_post(tokens)
        return x @ self.visual.proj if self.visual.proj is not None else x


class HFCLIPAdapter(HookedAdapter):
    """A Hugging Face ``CLIPModel`` or ``SiglipModel`` (``vision_model.encoder.layers``).

    Args:
        model: The joint model (``get_image_features`` / ``get_text_features``).
        processor: Its processor or tokenizer, for :meth:`encode_text` (optional).
    """

    # transformers models are duck-typed here (``config.vision_config``, ``get_image_features``);
    # ``nn.Module.__getattr__`` would type every such attribute as ``Tensor | Module``.
    model: Any
    vision: Any

    def __init__(self, model: nn.Module, processor: Any = None) -> None:
        vision = getattr(model, "vision_model", None)
        if vision is None or not hasattr(getattr(vision, "encoder", None), "layers"):
            raise TypeError(
                f"HFCLIPAdapter needs a CLIPModel/SiglipModel with vision_model.encoder.layers, "
                f"got {type(model).__name__}"
            )
        self.model, self.vision, self.processor = model, vision, processor
        cfg = self.model.config.vision_config
        self.blocks = list(vision.encoder.layers)
        side = int(cfg.image_size) // int(cfg.patch_size)
        self.grid_size = (side, side)
        self.image_size = as_pair(cfg.image_size)
        # CLIP prepends a class token; SigLIP has none (attention-pooling head)
        self.num_prefix_tokens = 1 if hasattr(vision.embeddings, "class_embedding") else 0

    @property
    def has_text(self) -> bool:
        """Whether a text encoder is available."""
        return self.processor is not None

    @property
    def has_joint(self) -> bool:
        """Whether ``to_joint`` is available."""
        return True

    def _forward(self, images: torch.Tensor) -> torch.Tensor:
        out = self.model.get_image_features(pixel_values=images)
        return out if isinstance(out, torch.Tensor) else out.pooler_output

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """Text embeddings in the joint space."""
        if self.processor is None:
            raise ValueError("HFCLIPAdapter was built without a processor: no text encoder")
        tok = getattr(self.processor, "tokenizer", self.processor)
        inputs = tok(list(texts), padding=True, return_tensors="pt")
        device = next(self.model.parameters()).device
        out = self.model.get_text_features(**{k: v.to(device) for k, v in inputs.items()})
        return out if isinstance(out, torch.Tensor) else out.pooler_output

    def to_joint(self, tokens: torch.Tensor) -> torch.Tensor:
        """Patch tokens into the joint space (final norm + projection)."""
        x = self.vision.post_layernorm(tokens)
        proj = getattr(self.model, "visual_projection", None)
        return proj(x) if proj is not None else x
