"""Model API: :class:`EOWMConfig`, :class:`EOWorldModel` and :class:`LatentAutoencoderWrapper`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F  # noqa: N812

from eo_wm._eo_wm import EOWMConfig, EOWorldModel


class LatentAutoencoderWrapper(nn.Module):
    """Let the DiT run on latents of any module with ``encode``/``decode``.

    For example a diffusers ``AutoencoderKL`` adapted to the band count.
    ``encode`` may return a tensor, an object with ``latent_dist`` (its ``mode()``/``mean``
    is used) or with ``latents``; ``decode`` a tensor or an object with ``sample``.
    Configure the :class:`EOWorldModel` with the latent channels and size.
    """

    # duck-typed: any module with encode/decode (their return types vary by library)
    autoencoder: Any

    def __init__(self, autoencoder: nn.Module) -> None:
        super().__init__()
        for name in ("encode", "decode"):
            if not callable(getattr(autoencoder, name, None)):
                raise TypeError(f"autoencoder must have a callable {name}()")
        self.autoencoder = autoencoder

    @torch.no_grad()
    def encode(self, frames: Tensor) -> Tensor:
        """``(B, T, C, H, W) -> (B, T, c, h, w)``."""
        B, T = frames.shape[:2]
        z = self.autoencoder.encode(frames.flatten(0, 1))
        if hasattr(z, "latent_dist"):
            dist = z.latent_dist
            z = dist.mode() if hasattr(dist, "mode") else dist.mean
        elif hasattr(z, "latents"):
            z = z.latents
        return z.view(B, T, *z.shape[1:])

    @torch.no_grad()
    def decode(self, latents: Tensor) -> Tensor:
        """``(..., T, c, h, w) -> (..., T, C, H, W)`` for any leading axes."""
        lead = latents.shape[:-3]
        x = self.autoencoder.decode(latents.reshape(-1, *latents.shape[-3:]))
        x = x.sample if hasattr(x, "sample") else x
        return x.view(*lead, *x.shape[1:])

    def latent_inputs(
        self, context: Tensor, context_mask: Tensor, static: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Context latents, a latent-grid mask (any-cloud pixel -> invalid) and pooled statics.

        Cloudy pixels are zero-filled before encoding.
        """
        z = self.encode(context * context_mask)
        h, w = z.shape[-2:]
        m = -F.adaptive_max_pool2d(-context_mask.flatten(0, 1), (h, w)).view(
            *context_mask.shape[:2], 1, h, w
        )
        st = F.adaptive_avg_pool2d(static, (h, w))
        return z, (m > 0.5).to(z.dtype), st

    def sample(
        self,
        model: EOWorldModel,
        context: Tensor,
        context_mask: Tensor,
        static: Tensor,
        cond: Mapping[str, Tensor],
        **kwargs: Any,
    ) -> Tensor:
        """Encode, sample latents with ``model.sample`` and decode: ``(M, B, T_f, C, H, W)``."""
        z, m, st = self.latent_inputs(context, context_mask, static)
        return self.decode(model.sample(z, m, st, cond, **kwargs))


__all__ = ["EOWMConfig", "EOWorldModel", "LatentAutoencoderWrapper"]
