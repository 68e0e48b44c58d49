"""The backbone protocol: what EditRIS needs from a frozen instruction-based image editor."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch


class CaptureError(RuntimeError):
    """The backbone's attention cannot be captured (fused or compiled attention processors)."""


@dataclass
class TokenBatch:
    """Tokenized instructions.

    Attributes:
        ids: int64 tensor (B, L).
        offsets: int64 tensor (B, L, 2), character span of each token in its text; special and
            padding tokens have ``(0, 0)``.
        attention_mask: bool tensor (B, L), False on padding.
        special: bool tensor (B, L), True on special tokens (BOS/EOS/PAD).
        truncated: bool tensor (B,), True where the text did not fit ``max_length``.
    """

    ids: torch.Tensor
    offsets: torch.Tensor
    attention_mask: torch.Tensor
    special: torch.Tensor
    truncated: torch.Tensor


@dataclass(frozen=True)
class LayerInfo:
    """One capturable layer: its name, kind and spatial resolution (side, in latent cells)."""

    name: str
    kind: str  # "cross_attn" | "self_attn" | "features"
    resolution: int


@dataclass(frozen=True)
class CaptureSpec:
    """What :meth:`EditingBackbone.forward_capture` records.

    Attributes:
        cross_attn: Cross-attention layer names to record (``None``: all).
        self_attn: Self-attention layer names to record (``None``: all; ``()``: none).
        features: Decoder feature layer names to record (``None``: all).
    """

    cross_attn: tuple[str, ...] | None = None
    self_attn: tuple[str, ...] | None = None
    features: tuple[str, ...] | None = None

    def wants(self, kind: str, name: str) -> bool:
        """Whether layer ``name`` of ``kind`` is recorded."""
        sel = {"cross_attn": self.cross_attn, "self_attn": self.self_attn}.get(kind, self.features)
        return sel is None or name in sel


@dataclass
class Capture:
    """What one denoiser call exposes.

    Attributes:
        cross_attn: layer -> (B, heads, HW, L) attention probabilities over text tokens.
        self_attn: layer -> (B, HW, HW) head-averaged self-attention (row-stochastic).
        features: layer -> (B, C, H, W) decoder block outputs.
        eps: the denoiser's raw output (B, C, h, w).
        x0: the clean-latent estimate derived from ``eps`` under the model's parametrisation.
        token_mask: bool (B, L), False on padding (already masked in ``cross_attn``).
        timestep: the timestep the call was made at.
    """

    cross_attn: dict[str, torch.Tensor] = field(default_factory=dict)
    self_attn: dict[str, torch.Tensor] = field(default_factory=dict)
    features: dict[str, torch.Tensor] = field(default_factory=dict)
    eps: torch.Tensor | None = None
    x0: torch.Tensor | None = None
    token_mask: torch.Tensor | None = None
    timestep: int = -1


@runtime_checkable
class EditingBackbone(Protocol):
    """A frozen instruction-based image editor (InstructPix2Pix-style denoiser).

    ``images`` are float tensors (B, 3, H, W) in [0, 1]; instructions are strings.
    """

    num_train_timesteps: int
    downsample_factor: int

    def tokenize(self, texts: Sequence[str]) -> TokenBatch:
        """Tokenize instructions with character offsets."""
        ...

    def timesteps(self, num_inference_steps: int) -> list[int]:
        """The inference schedule's timesteps, noisiest first."""
        ...

    def earliest_timestep(self) -> int:
        """The first (noisiest) timestep of the default inference schedule."""
        ...

    def layer_info(self) -> list[LayerInfo]:
        """Every capturable layer."""
        ...

    def forward_capture(
        self,
        images: torch.Tensor,
        instructions: Sequence[str],
        t: int,
        seed: int,
        capture: CaptureSpec | None = None,
    ) -> Capture:
        """One conditional denoiser call at timestep ``t`` with a seeded noise latent."""
        ...

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents -> images (B, 3, H, W) in [0, 1]."""
        ...

    def edit(
        self, images: torch.Tensor, instructions: Sequence[str], num_inference_steps: int, seed: int
    ) -> torch.Tensor:
        """Run the full edit (the expensive path), images in [0, 1]."""
        ...
