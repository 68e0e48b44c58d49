"""The adapter protocol and the hook-based base class every adapter builds on."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from easylens._hooks import Edit, capture_input, edit_input, edit_inputs
from easylens._validation import check_finite, check_positive_int


@runtime_checkable
class TokenEncoderAdapter(Protocol):
    """What EasyLens needs from a frozen ViT-style image encoder.

    Tokens are always batch-first ``[B, P + N, d]``: ``P = num_prefix_tokens`` prefix tokens
    (CLS, registers) then ``N = H * W`` patch tokens in row-major grid order.
    """

    num_layers: int
    grid_size: tuple[int, int]
    num_prefix_tokens: int

    def tokens_at(self, images: torch.Tensor, layer: int) -> torch.Tensor:
        """Tokens entering block ``layer``, ``[B, P + N, d]``."""
        ...

    def resume(self, tokens: torch.Tensor, layer: int) -> torch.Tensor:
        """Run blocks ``layer..L-1`` and the head on ``tokens``."""
        ...

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        """Image embeddings ``[B, E]``."""
        ...

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """Text embeddings in the joint space."""
        ...


def fingerprint(module: nn.Module) -> str:
    """A short id of a module's architecture and weights (class, shapes, parameter sums)."""
    h = hashlib.sha1(type(module).__name__.encode())
    with torch.no_grad():
        for name, p in module.state_dict().items():
            h.update(f"{name}{tuple(p.shape)}".encode())
            if p.is_floating_point() and p.numel():
                flat = p.detach().reshape(-1).double()
                probe = flat[:: max(1, flat.numel() // 7)]
                h.update(f"{float(flat.sum()):.10e}{float(probe.sum()):.10e}".encode())
    return f"{type(module).__name__}-{h.hexdigest()[:12]}"


class HookedAdapter:
    """Base adapter: reads and swaps the input of block ``l`` with a forward-pre-hook.

    Subclasses set ``model``, ``blocks``, ``grid_size``, ``num_prefix_tokens``,
    ``image_size`` (``(H, W)`` pixels or None), ``seq_first`` and implement
    :meth:`_forward` (the library's own image forward).
    """

    model: nn.Module
    blocks: Sequence[nn.Module]
    grid_size: tuple[int, int]
    num_prefix_tokens: int
    image_size: tuple[int, int] | None = None
    seq_first: bool = False
    _backbone_id: str | None = None
    _in_chans: int | None = None
    _expected_chans: int | None = None

    # -- subclasses --------------------------------------------------------------------------
    def _forward(self, images: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    # -- protocol ----------------------------------------------------------------------------
    @property
    def num_layers(self) -> int:
        """Number of transformer blocks ``L``."""
        return len(self.blocks)

    @property
    def num_patches(self) -> int:
        """``N = H * W`` patch tokens."""
        return self.grid_size[0] * self.grid_size[1]

    @property
    def backbone_id(self) -> str:
        """Fingerprint of the wrapped model (class, parameter shapes and sums)."""
        if self._backbone_id is None:
            self._backbone_id = fingerprint(self.model)
        return self._backbone_id

    @property
    def has_text(self) -> bool:
        """Whether :meth:`encode_text` is available."""
        return False

    @property
    def has_joint(self) -> bool:
        """Whether :meth:`to_joint` is available."""
        return False

    @property
    def in_chans(self) -> int | None:
        """Input channels the encoder expects (its first ``Conv2d``; None when unknown)."""
        if self._expected_chans is None:
            conv = next((m for m in self.model.modules() if isinstance(m, nn.Conv2d)), None)
            self._expected_chans = 0 if conv is None else int(conv.in_channels)
        return self._expected_chans or None

    def check_images(self, images: torch.Tensor) -> torch.Tensor:
        """Validate an image batch ``[B, C, H, W]``.

        Raises:
            TypeError: not a tensor, or not floating point (e.g. raw ``uint8`` pixels).
            ValueError: not 4-d, an empty batch, a channel count the encoder does not take,
                a spatial size other than the adapter's, or NaN/inf values.
        """
        if not isinstance(images, torch.Tensor):
            raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
        if images.ndim != 4:
            raise ValueError(f"images must be [B, C, H, W], got shape {tuple(images.shape)}")
        if images.shape[0] == 0:
            raise ValueError(
                f"images is an empty batch (shape {tuple(images.shape)}); pass at least one image"
            )
        if not images.is_floating_point():
            raise TypeError(
                f"images must be a floating-point tensor preprocessed like the model's training "
                f"images, got dtype {images.dtype} (raw pixels? e.g. images.float() / 255, then "
                "the model's normalisation)"
            )
        chans = self.in_chans
        if chans is not None and images.shape[1] != chans:
            raise ValueError(
                f"images have {images.shape[1]} channel(s) (shape {tuple(images.shape)}) but the "
                f"encoder takes {chans}"
                + (" (grayscale? repeat it: images.expand(-1, 3, -1, -1))" if chans == 3 else "")
            )
        if self.image_size is not None and tuple(images.shape[-2:]) != tuple(self.image_size):
            raise ValueError(
                f"images are {tuple(images.shape[-2:])} pixels but the adapter's grid "
                f"{self.grid_size} expects {tuple(self.image_size)}"
            )
        check_finite(images, "images")
        self._in_chans = int(images.shape[1])
        return images

    def layer_index(self, layer: int, *, allow_zero: bool = False) -> int:
        """Validate a working layer: ``[1, L-1]`` (``[0, L-1]`` with ``allow_zero``)."""
        lo = 0 if allow_zero else 1
        if isinstance(layer, bool) or not isinstance(layer, int):
            raise ValueError(
                f"layer must be an int in [{lo}, {self.num_layers - 1}], got {layer!r}"
            )
        if not lo <= layer <= self.num_layers - 1:
            raise ValueError(
                f"layer must be in [{lo}, {self.num_layers - 1}] for a {self.num_layers}-block "
                f"encoder, got {layer}"
            )
        return layer

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        """The library's own image embedding (unnormalised)."""
        return self._forward(self.check_images(images))

    def tokens_at(self, images: torch.Tensor, layer: int) -> torch.Tensor:
        """Tokens entering block ``layer``, ``[B, P + N, d]``."""
        self.layer_index(layer, allow_zero=True)
        images = self.check_images(images)
        return capture_input(
            lambda: self._forward(images), self.blocks[layer], seq_first=self.seq_first
        )

    def forward_with_edits(self, images: torch.Tensor, edits: dict[int, Edit]) -> torch.Tensor:
        """Image forward with ``edits[l]`` applied to the tokens entering block ``l``."""
        images = self.check_images(images)
        hooks = [(self.blocks[layer], fn) for layer, fn in sorted(edits.items())]
        with edit_inputs(hooks, seq_first=self.seq_first):
            return self._forward(images)

    def resume(self, tokens: torch.Tensor, layer: int) -> torch.Tensor:
        """Run blocks ``layer..L-1`` and the head on ``tokens`` ``[B, P + N, d]``."""
        self.layer_index(layer, allow_zero=True)
        if self.image_size is None or self._in_chans is None:
            raise RuntimeError("resume needs one image batch to have been seen first")
        placeholder = torch.zeros(
            (tokens.shape[0], self._in_chans, *self.image_size),
            dtype=self._param_dtype(),
            device=tokens.device,
        )
        with edit_input(self.blocks[layer], lambda _x: tokens, seq_first=self.seq_first):
            return self._forward(placeholder)

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """Text embeddings in the joint space (where the model has a text tower)."""
        raise ValueError(f"{type(self).__name__} has no text encoder")

    def to_joint(self, tokens: torch.Tensor) -> torch.Tensor:
        """Patch tokens ``[..., d]`` into the joint image-text space (MaskCLIP-style)."""
        raise ValueError(f"{type(self).__name__} has no to_joint (final norm + projection)")

    def _param_dtype(self) -> torch.dtype:
        for p in self.model.parameters():
            if p.is_floating_point():
                return p.dtype
        return torch.float32


class GenericViTAdapter(HookedAdapter):
    """Any ViT-style ``nn.Module``: an embedding, a list of blocks and a head.

    Args:
        embed_fn: ``images -> tokens [B, P + N, d]`` (patch embedding, prefix, positions).
        blocks: The transformer blocks, called in order on batch-first tokens.
        head_fn: ``tokens after the last block -> g [B, E]`` (norm, pooling, projection).
        grid_size: ``(H, W)`` of the patch grid.
        num_prefix_tokens: Number of prefix tokens before the patches.
        image_size: ``(H, W)`` in pixels, checked on every call (None: not checked).
        text_fn: Optional ``texts -> [T, E]`` text encoder in the joint space.
        joint_fn: Optional ``patch tokens [..., d] -> [..., E]`` (final norm + projection).
        model: The module whose weights identify the backbone (default: the blocks).
        in_chans: Input channels checked on every call (default: the ``in_channels`` of the
            first ``Conv2d`` in ``model``; not checked when there is none).

    A generative VLM's vision tower is wrapped by passing its own blocks; ``EasyLens.attach``
    then hooks those blocks so the tower's own forward receives the amplified tokens.
    """

    def __init__(
        self,
        embed_fn: Callable[[torch.Tensor], torch.Tensor],
        blocks: Sequence[nn.Module],
        head_fn: Callable[[torch.Tensor], torch.Tensor],
        grid_size: tuple[int, int],
        num_prefix_tokens: int,
        *,
        image_size: tuple[int, int] | None = None,
        text_fn: Callable[[Sequence[str]], torch.Tensor] | None = None,
        joint_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
        model: nn.Module | None = None,
        in_chans: int | None = None,
    ) -> None:
        if len(blocks) < 2:
            raise ValueError(f"blocks must hold at least 2 blocks, got {len(blocks)}")
        if len(grid_size) != 2 or min(grid_size) < 1:
            raise ValueError(f"grid_size must be (H, W) >= 1, got {grid_size!r}")
        if num_prefix_tokens < 0:
            raise ValueError(f"num_prefix_tokens must be >= 0, got {num_prefix_tokens}")
        self.embed_fn, self.head_fn = embed_fn, head_fn
        self.blocks = list(blocks)
        self.grid_size = (int(grid_size[0]), int(grid_size[1]))
        self.num_prefix_tokens = int(num_prefix_tokens)
        self.image_size = None if image_size is None else (int(image_size[0]), int(image_size[1]))
        self.text_fn, self.joint_fn = text_fn, joint_fn
        self.model = model if model is not None else nn.ModuleList(self.blocks)
        if in_chans is not None:
            self._expected_chans = check_positive_int(in_chans, "in_chans")

    @property
    def has_text(self) -> bool:
        """Whether a text encoder is available."""
        return self.text_fn is not None

    @property
    def has_joint(self) -> bool:
        """Whether ``to_joint`` is available."""
        return self.joint_fn is not None

    def _run(self, x: torch.Tensor, start: int) -> torch.Tensor:
        for block in self.blocks[start:]:
            x = block(x)
            if isinstance(x, tuple):  # blocks that return (hidden, attn, ...)
                x = x[0]
        return self.head_fn(x)

    def _forward(self, images: torch.Tensor) -> torch.Tensor:
        return self._run(self.embed_fn(images), 0)

    def resume(self, tokens: torch.Tensor, layer: int) -> torch.Tensor:
        """Run blocks ``layer..L-1`` and the head on ``tokens``."""
        self.layer_index(layer, allow_zero=True)
        return self._run(tokens, layer)

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """Text embeddings in the joint space."""
        if self.text_fn is None:
            raise ValueError("GenericViTAdapter has no text encoder (pass text_fn=)")
        return self.text_fn(list(texts))

    def to_joint(self, tokens: torch.Tensor) -> torch.Tensor:
        """Patch tokens into the joint space (final norm + projection)."""
        if self.joint_fn is None:
            raise ValueError("GenericViTAdapter has no to_joint (pass joint_fn=)")
        return self.joint_fn(tokens)


def as_pair(x: Any) -> tuple[int, int]:
    """``int`` or pair -> ``(h, w)``."""
    if isinstance(x, (tuple, list)):
        return int(x[0]), int(x[1])
    return int(x), int(x)
