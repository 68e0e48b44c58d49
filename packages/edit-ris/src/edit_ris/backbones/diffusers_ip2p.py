"""Adapter for diffusers InstructPix2Pix-style pipelines (UNet2DConditionModel + VAE + CLIP).

Attention is captured by a custom attention processor with an explicit softmax, installed in a
context manager that restores the pipeline's original processors even when the forward raises.
The image latent is the VAE posterior mode, unscaled, concatenated on channels after the noisy
latent, exactly as ``StableDiffusionInstructPix2PixPipeline`` does. ``diffusers`` is imported
lazily (extra ``edit-ris[diffusers]``).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from edit_ris.backbones.base import Capture, CaptureError, CaptureSpec, LayerInfo, TokenBatch
from edit_ris.tokens import hf_tokenize

_STANDARD = ("AttnProcessor", "AttnProcessor2_0", "XFormersAttnProcessor")


class CaptureAttnProcessor:
    """diffusers attention processor with an explicit softmax that records probabilities.

    Mirrors ``diffusers.models.attention_processor.AttnProcessor``; cross-attention
    probabilities are kept as (B, heads, HW, L), self-attention as head means (B, HW, HW).
    """

    def __init__(self, name: str, is_cross: bool, spec: CaptureSpec, capture: Capture) -> None:
        self.name, self.is_cross, self.spec, self.capture = name, is_cross, spec, capture

    def __call__(
        self,
        attn: Any,
        hidden_states: Any,
        encoder_hidden_states: Any = None,
        attention_mask: Any = None,
        temb: Any = None,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """The AttnProcessor computation, recording the softmax probabilities."""
        residual = hidden_states
        if attn.spatial_norm is not None:
            hidden_states = attn.spatial_norm(hidden_states, temb)
        input_ndim = hidden_states.ndim
        if input_ndim == 4:
            b, c, h, w = hidden_states.shape
            hidden_states = hidden_states.view(b, c, h * w).transpose(1, 2)
        batch_size, seq_len, _ = (
            hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape
        )
        attention_mask = attn.prepare_attention_mask(attention_mask, seq_len, batch_size)
        if attn.group_norm is not None:
            hidden_states = attn.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
        query = attn.to_q(hidden_states)
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        elif attn.norm_cross:
            encoder_hidden_states = attn.norm_encoder_hidden_states(encoder_hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)
        query, key, value = (attn.head_to_batch_dim(v) for v in (query, key, value))
        probs = attn.get_attention_scores(query, key, attention_mask)  # explicit softmax
        kind = "cross_attn" if self.is_cross else "self_attn"
        if self.spec.wants(kind, self.name):
            p = probs.view(batch_size, attn.heads, probs.shape[1], probs.shape[2])
            if self.is_cross:
                self.capture.cross_attn[self.name] = p
            else:
                self.capture.self_attn[self.name] = p.mean(1)
        hidden_states = attn.batch_to_head_dim(torch.bmm(probs, value))
        hidden_states = attn.to_out[1](attn.to_out[0](hidden_states))
        if input_ndim == 4:
            hidden_states = hidden_states.transpose(-1, -2).reshape(b, c, h, w)
        if attn.residual_connection:
            hidden_states = hidden_states + residual
        return hidden_states / attn.rescale_output_factor


def _block_resolution(name: str, sample_size: int, n_blocks: int) -> int:
    """Latent side of a UNet sub-module from its name (down_blocks.i / mid_block / up_blocks.i)."""
    parts = name.split(".")
    if parts[0] == "down_blocks":
        return sample_size // 2 ** int(parts[1])
    if parts[0] == "up_blocks":
        return sample_size // 2 ** (n_blocks - 1 - int(parts[1]))
    return sample_size // 2 ** (n_blocks - 1)


class DiffusersIP2PBackbone:
    """:class:`~edit_ris.backbones.EditingBackbone` over an InstructPix2Pix-style pipeline.

    Args:
        pipe: ``StableDiffusionInstructPix2PixPipeline`` or any object with ``vae``, ``unet``,
            ``text_encoder``, ``tokenizer`` (a fast tokenizer) and ``scheduler``.
        num_inference_steps: Length of the inference schedule whose first step is t0.

    Raises:
        CaptureError: If the UNet is compiled or uses fused attention processors.
    """

    def __init__(self, pipe: Any, num_inference_steps: int = 20) -> None:
        for part in ("vae", "unet", "text_encoder", "tokenizer", "scheduler"):
            if getattr(pipe, part, None) is None:
                raise TypeError(
                    f"pipe has no {part!r}; an InstructPix2Pix-style pipeline is needed"
                )
        self.pipe = pipe
        self.unet = pipe.unet
        self._check_capturable()
        self.num_inference_steps = int(num_inference_steps)
        self.num_train_timesteps = int(pipe.scheduler.config.num_train_timesteps)
        self.vae_scale = 2 ** (len(pipe.vae.config.block_out_channels) - 1)
        n_blocks = len(self.unet.config.block_out_channels)
        self.downsample_factor = self.vae_scale
        self.size_multiple = self.vae_scale * 2 ** (n_blocks - 1)

    def _check_capturable(self) -> None:
        if hasattr(self.unet, "_orig_mod") or type(self.unet).__name__ == "OptimizedModule":
            raise CaptureError(
                "the UNet is torch.compile'd: attention cannot be captured; pass the "
                "uncompiled pipeline"
            )
        for name, proc in self.unet.attn_processors.items():
            cls = type(proc).__name__
            if "Fused" in cls or (
                cls not in _STANDARD and not isinstance(proc, CaptureAttnProcessor)
            ):
                raise CaptureError(
                    f"attention processor {cls} at {name} cannot be captured (fused or custom "
                    "processors); call pipe.unfuse_qkv_projections() / "
                    "pipe.unet.set_default_attn_processor() first"
                )

    # -- protocol -----------------------------------------------------------------------
    def tokenize(self, texts: Sequence[str]) -> TokenBatch:
        """The pipeline tokenizer's ids and character offsets (padded to its max length)."""
        return hf_tokenize(self.pipe.tokenizer, texts)

    def _scheduler(self, num_inference_steps: int) -> Any:
        sched = copy.deepcopy(self.pipe.scheduler)  # never modify the user's pipeline
        sched.set_timesteps(num_inference_steps)
        return sched

    def timesteps(self, num_inference_steps: int) -> list[int]:
        """The scheduler's inference timesteps (a copy of the scheduler is used)."""
        return [int(t) for t in self._scheduler(num_inference_steps).timesteps]

    def earliest_timestep(self) -> int:
        """The scheduler's first inference timestep."""
        return self.timesteps(self.num_inference_steps)[0]

    def layer_info(self) -> list[LayerInfo]:
        """Cross/self attention layers of the UNet and its up-block outputs."""
        size = int(self.unet.config.sample_size)
        n = len(self.unet.config.block_out_channels)
        out = []
        for name in self.unet.attn_processors:
            mod = name.removesuffix(".processor")
            kind = "cross_attn" if mod.endswith("attn2") else "self_attn"
            out.append(LayerInfo(mod, kind, _block_resolution(mod, size, n)))
        for i in range(len(self.unet.up_blocks)):
            res = _block_resolution(f"up_blocks.{i}", size, n)
            if getattr(self.unet.up_blocks[i], "upsamplers", None):
                res *= 2
            out.append(LayerInfo(f"up_blocks.{i}", "features", res))
        return out

    @contextlib.contextmanager
    def capturing(self, spec: CaptureSpec, cap: Capture) -> Iterator[None]:
        """Install capture processors and feature hooks; restore the originals on exit."""
        self._check_capturable()
        original = dict(self.unet.attn_processors)
        hooks = []
        try:
            procs = {
                name: CaptureAttnProcessor(
                    name.removesuffix(".processor"), name.endswith("attn2.processor"), spec, cap
                )
                for name in original
            }
            self.unet.set_attn_processor(procs)
            for i, block in enumerate(self.unet.up_blocks):
                name = f"up_blocks.{i}"
                if spec.wants("features", name):

                    def hook(_m: Any, _inp: Any, out: Any, name: Any = name) -> Any:
                        cap.features[name] = out[0] if isinstance(out, tuple) else out

                    hooks.append(block.register_forward_hook(hook))
            yield
        finally:
            for h in hooks:
                h.remove()
            self.unet.set_attn_processor(original)

    def _text(self, instructions: Sequence[str], device: Any) -> tuple[torch.Tensor, TokenBatch]:
        tb = self.tokenize(instructions)
        emb = self.pipe.text_encoder(tb.ids.to(device))[0]
        return emb, tb

    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """Image latent as the pipeline makes it: VAE posterior mode of ``2 x - 1``, unscaled."""
        vae = self.pipe.vae
        return vae.encode((images * 2 - 1).to(vae.dtype)).latent_dist.mode()

    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Scaled latents -> images in [0, 1] (``vae.decode(z / scaling_factor)``)."""
        vae = self.pipe.vae
        img = vae.decode(latents / vae.config.scaling_factor).sample
        return ((img.float() + 1) / 2).clamp(0, 1)

    def _x0(self, sched: Any, x_t: torch.Tensor, out: torch.Tensor, t: int) -> torch.Tensor:
        kind = sched.config.get("prediction_type", "epsilon")
        sigmas = getattr(sched, "sigmas", None)
        if sigmas is not None and float(sched.init_noise_sigma) > 1.0:  # k-diffusion form
            idx = int((sched.timesteps == t).nonzero()[0]) if (sched.timesteps == t).any() else 0
            s = sigmas[idx].to(x_t)
            if kind == "v_prediction":
                return out * (-s / (s**2 + 1) ** 0.5) + x_t / (s**2 + 1)
            return x_t - s * out
        ab = sched.alphas_cumprod[t].to(x_t)
        if kind == "v_prediction":
            return ab.sqrt() * x_t - (1 - ab).sqrt() * out
        if kind == "sample":
            return out
        return (x_t - (1 - ab).sqrt() * out) / ab.sqrt()

    @torch.no_grad()
    def forward_capture(
        self, images: Any, instructions: Any, t: Any, seed: Any, capture: Any = None
    ) -> Capture:
        """One conditional UNet call at ``t`` (no classifier-free guidance batch)."""
        dev, dtype = self.unet.device, self.unet.dtype
        images = images.to(dev)
        emb, tb = self._text(instructions, dev)
        image_latent = self.encode(images).to(dtype)
        sched = self._scheduler(self.num_inference_steps)
        g = torch.Generator().manual_seed(int(seed))
        shape = (images.shape[0], self.unet.config.out_channels, *image_latent.shape[-2:])
        latents = (torch.randn(shape, generator=g) * float(sched.init_noise_sigma)).to(dev, dtype)
        if not (sched.timesteps == t).any():  # a timestep outside the inference schedule
            sched.timesteps = torch.tensor([int(t)])
            if hasattr(sched, "sigmas") and float(sched.init_noise_sigma) > 1.0:
                ab = sched.alphas_cumprod[int(t)]
                sched.sigmas = torch.tensor([((1 - ab) / ab).sqrt(), 0.0])
        tt = torch.tensor(int(t), device=dev)
        x_in = sched.scale_model_input(latents, sched.timesteps[sched.timesteps == t][0])
        cap = Capture(token_mask=tb.attention_mask.to(dev), timestep=int(t))
        model_in = torch.cat([x_in, image_latent], dim=1)
        if capture is None:
            out = self.unet(model_in, tt, encoder_hidden_states=emb.to(dtype)).sample
        else:
            with self.capturing(capture, cap):
                out = self.unet(model_in, tt, encoder_hidden_states=emb.to(dtype)).sample
        cap.eps = out
        cap.x0 = self._x0(sched, latents, out, int(t))
        return cap

    @torch.no_grad()
    def edit(
        self, images: Any, instructions: Any, num_inference_steps: int = 20, seed: int = 0
    ) -> Any:
        """The pipeline's own full edit (guidance as the pipeline defaults), images in [0, 1]."""
        g = torch.Generator().manual_seed(int(seed))
        out = self.pipe(
            prompt=list(instructions),
            image=images,
            num_inference_steps=num_inference_steps,
            generator=g,
            output_type="pt",
        )
        return out.images.float().clamp(0, 1)
