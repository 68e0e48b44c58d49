"""Baselines the benchmark compares EasyLens with; all share its adapter interface.

``Vanilla`` (frozen encoder), ``BlindAmplifier`` (every patch amplified), ``RandomTag`` (as
many random patches as EasyTag picks), ``LesionOnlyTag`` (select by lesion evidence alone, no
normal counterfactual), ``NoMorphology`` (w = 1 on S, no ring, gain 1),
``CLSAttentionReweight`` (top patches by similarity to CLS, generic token reweighting),
``PatchMaxScore`` (WinCLIP-like score fusion) and ``OracleTag`` (ground-truth patches).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.nn import functional as nnf

from easylens._easylens import EasyLens, text_direction
from easylens._hooks import capture_output
from easylens._validation import check_nonneg
from easylens.tag import TagResult, cap_top_k

__all__ = [
    "BlindAmplifier",
    "CLSAttentionReweight",
    "LesionOnlyTag",
    "NoMorphology",
    "OracleTag",
    "PatchMaxScore",
    "RandomTag",
    "Vanilla",
]


class Vanilla:
    """The frozen encoder as it is."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        """Image embeddings ``[B, E]``."""
        with torch.no_grad():
            return self.adapter.encode_image(images)

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """Text embeddings in the joint space."""
        return self.adapter.encode_text(texts)


class BlindAmplifier(EasyLens):
    """Every patch amplified with the same strength (w = 1, gain 1): no EasyTag."""

    def _select(self, tag: TagResult, tokens: torch.Tensor, box: dict) -> torch.Tensor:
        return torch.ones_like(tag.selected)

    def _weights(self, selected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ones = selected.double()
        return ones, ones


class RandomTag(EasyLens):
    """As many patches as EasyTag selects, chosen uniformly at random (seeded)."""

    def __init__(self, *args: Any, seed: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.generator = torch.Generator().manual_seed(seed)

    def _select(self, tag: TagResult, tokens: torch.Tensor, box: dict) -> torch.Tensor:
        b = tag.selected.shape[0]
        counts = tag.selected.reshape(b, -1).sum(1)
        out = torch.zeros(b, self.bank.num_patches, dtype=torch.bool)
        for i, k in enumerate(counts.tolist()):
            out[i, torch.randperm(self.bank.num_patches, generator=self.generator)[:k]] = True
        return out.reshape(tag.selected.shape).to(tag.selected.device)


class LesionOnlyTag(EasyLens):
    """Select by the calibrated lesion evidence ``e_L`` alone (no normal counterfactual)."""

    def _select(self, tag: TagResult, tokens: torch.Tensor, box: dict) -> torch.Tensor:
        b = tag.selected.shape[0]
        e_l = tag.lesion_evidence.reshape(b, -1)
        if self.bank.reference == "position":
            group = torch.arange(e_l.shape[1], device=e_l.device).expand(b, -1)
        else:
            group = tag.counterfactual_index
        u = (e_l - self.bank.lesion_mu[group]) / self.bank.lesion_sigma[group]
        sel = cap_top_k(u > self.tag.threshold, u, self.tag.k_max)
        return sel.reshape(tag.selected.shape)


class NoMorphology(EasyLens):
    """``w = 1`` on S, no dilation ring, no size-adaptive gain."""

    def _weights(self, selected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        w = selected.double()
        return w, w


class OracleTag(EasyLens):
    """Ground-truth lesion patches with the same amplifier (synthetic upper bound).

    Call ``encode_image(images, patch_mask)`` with ``patch_mask [B, H, W]``.
    """

    def encode_image(
        self, images: torch.Tensor, patch_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Embeddings with the ground-truth ``patch_mask [B, H, W]`` as the tagged set."""
        if patch_mask is None:
            raise ValueError("OracleTag.encode_image needs patch_mask [B, H, W]")
        if tuple(patch_mask.shape) != (len(images), *self.bank.grid_size):
            raise ValueError(
                f"patch_mask has shape {tuple(patch_mask.shape)}, expected "
                f"{(len(images), *self.bank.grid_size)}"
            )
        self._mask = patch_mask.bool()
        try:
            return super().encode_image(images)
        finally:
            del self._mask

    def _select(self, tag: TagResult, tokens: torch.Tensor, box: dict) -> torch.Tensor:
        return self._mask.to(tag.selected.device)


class CLSAttentionReweight:
    """Generic training-free token reweighting around the CLS token.

    Amplifies the ``rho`` share of patches most similar to the CLS token at ``layer``, away
    from the image's mean patch direction.

    ``z_i' = z_i + alpha (z_i - ||z_i|| mean_j(z_j)^)`` on the chosen patches.
    """

    def __init__(self, adapter: Any, layer: int, rho: float = 0.05, alpha: float = 1.0) -> None:
        if adapter.num_prefix_tokens < 1:
            raise ValueError("CLSAttentionReweight needs a CLS prefix token")
        self.adapter, self.layer = adapter, adapter.layer_index(layer)
        self.rho, self.alpha = check_nonneg(rho, "rho"), check_nonneg(alpha, "alpha")

    def _edit(self, x: torch.Tensor) -> torch.Tensor:
        p = self.adapter.num_prefix_tokens
        z = x[:, p:]
        k = max(1, round(self.rho * z.shape[1]))
        sim = nnf.normalize(z, dim=-1) @ nnf.normalize(x[:, 0], dim=-1).unsqueeze(-1)
        idx = sim.squeeze(-1).topk(k, dim=1).indices
        mask = torch.zeros(z.shape[:2], dtype=torch.bool, device=z.device).scatter_(1, idx, True)
        mean = nnf.normalize(z.mean(1, keepdim=True), dim=-1)
        r = z - z.norm(dim=-1, keepdim=True) * mean
        z_new = torch.where(mask.unsqueeze(-1), z + self.alpha * r, z)
        return torch.cat([x[:, :p], z_new], dim=1)

    @torch.no_grad()
    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        """Image embeddings ``[B, E]``."""
        return self.adapter.forward_with_edits(images, {self.layer: self._edit})

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """Text embeddings in the joint space."""
        return self.adapter.encode_text(texts)


class PatchMaxScore:
    """WinCLIP-like score fusion: ``s(I) + max_i s(to_joint(z_i^L))`` (score level)."""

    def __init__(
        self, adapter: Any, positive_prompts: Sequence[str], negative_prompts: Sequence[str]
    ) -> None:
        if not adapter.has_joint:
            raise ValueError("PatchMaxScore needs an adapter with to_joint")
        self.adapter = adapter
        with torch.no_grad():
            self.t_pos = text_direction(adapter, positive_prompts)
            self.t_neg = text_direction(adapter, negative_prompts)

    def fit(self, X: Any = None, y: Any = None) -> PatchMaxScore:
        """No-op (zero-shot); returns self."""
        return self

    @torch.no_grad()
    def decision_function(self, images: torch.Tensor) -> np.ndarray:
        """Lesion scores ``[B]``."""
        images = self.adapter.check_images(images)
        box: dict[str, torch.Tensor] = {}

        def run() -> None:
            box["g"] = self.adapter.encode_image(images)

        last = capture_output(run, self.adapter.blocks[-1], seq_first=self.adapter.seq_first)
        g = nnf.normalize(box["g"].float(), dim=-1)
        zj = nnf.normalize(
            self.adapter.to_joint(last[:, self.adapter.num_prefix_tokens :]).float(), dim=-1
        )
        s_img = g @ self.t_pos - g @ self.t_neg
        s_patch = (zj @ self.t_pos - zj @ self.t_neg).max(dim=1).values
        return (s_img + s_patch).cpu().numpy().astype(np.float64)
