"""TinyCLIP: a tiny CLIP-style model trained from scratch on the synthetic scans.

A SYNTHETIC stand-in for a medical vision-language model, not a medical model: a ViT with
4 x 4 patches on 32 x 32 images (8 x 8 = 64 patch tokens + CLS, width 64, 4 pre-LN blocks,
CLS pooling, 64-d joint space) and a causal 2-block text transformer over the ~20-word
vocabulary of the templated reports.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as nnf

from easylens.adapters import GenericViTAdapter
from easylens.synthetic.scans import MORPHOLOGIES, SIDES, ScanGenerator, report, reports
from methodkit import progress as show_progress

VOCAB = (
    "<pad>",
    "<eot>",
    "normal",
    "chest",
    "scan",
    "with",
    "no",
    "lesion",
    "a",
    "in",
    "the",
    "lung",
    *SIDES,
    *MORPHOLOGIES,
)


class TinyTokenizer:
    """Word-level tokenizer over :data:`VOCAB` (``<eot>`` appended, padded to ``length``)."""

    def __init__(self, length: int = 14) -> None:
        self.length = length
        self.index = {w: i for i, w in enumerate(VOCAB)}

    def __call__(self, texts: Sequence[str]) -> torch.Tensor:
        """Token ids ``[T, length]``."""
        out = torch.zeros(len(texts), self.length, dtype=torch.long)
        for i, t in enumerate(texts):
            words = t.lower().replace(",", " ").split()
            unknown = [w for w in words if w not in self.index]
            if unknown:
                raise ValueError(f"words {unknown} are not in the TinyCLIP vocabulary {VOCAB}")
            ids = [*[self.index[w] for w in words][: self.length - 1], self.index["<eot>"]]
            out[i, : len(ids)] = torch.tensor(ids)
        return out


class Block(nn.Module):
    """Pre-LN transformer block (batch-first)."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.mlp = nn.Sequential(
            nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        )

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Forward pass."""
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=attn_mask, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


FILTER_BANKS = ("none", "dog", "dog_max")


class BlobFilterBank(nn.Module):
    """A FIXED (untrained) multi-scale blob filter bank: stand-in for pretrained low-level features.

    Generic local structure, as a pretrained CLIP's early features hold it: blobs at several
    scales, nothing lesion-specific. Channels: the raw image, then per scale ``s`` in ``sigmas``
    the two rectified halves ``relu(+D_s)`` and ``relu(-D_s)`` of a difference of Gaussians
    ``D_s = G_s - G_{ratio * s}`` (bright and dark blobs), each scaled so that a unit-amplitude
    Gaussian blob of width ``s`` gives a response of 1 at its centre: ``1 + 2 * len(sigmas)``
    channels at full resolution.
    With ``patch_max`` (:meth:`patch_max`) the rectified channels' maximum over each
    ``patch x patch`` patch is also available, so a 1-2 px blob anywhere inside a patch gives a
    strong response in that patch's token. Buffers only: no parameter is trained.
    """

    def __init__(self, sigmas: Sequence[float] = (0.5, 1.0, 2.0), ratio: float = 1.6) -> None:
        super().__init__()
        finite = all(np.isfinite(s) for s in sigmas) and np.isfinite(ratio)
        if not sigmas or not finite or any(s <= 0 for s in sigmas) or ratio <= 1:
            raise ValueError(
                f"sigmas must be non-empty, finite and positive and ratio finite and > 1, "
                f"got {sigmas}, {ratio}"
            )
        radius = int(np.ceil(3 * ratio * max(sigmas)))
        x = torch.arange(-radius, radius + 1, dtype=torch.float64)
        xx, yy = torch.meshgrid(x, x, indexing="ij")
        r2 = xx**2 + yy**2
        kernels = []
        for s in sigmas:
            g1 = torch.exp(-r2 / (2 * s**2))
            g2 = torch.exp(-r2 / (2 * (ratio * s) ** 2))
            dog = g1 / g1.sum() - g2 / g2.sum()
            blob = torch.exp(-r2 / (2 * s**2))  # unit-amplitude blob of width s at the centre
            kernels.append(dog / (dog * blob).sum())
        self.radius = radius
        self.kernels: torch.Tensor
        self.register_buffer("kernels", torch.stack(kernels)[:, None].float(), persistent=False)

    @property
    def channels(self) -> int:
        """Output channels: the raw image plus two rectified responses per scale."""
        return 1 + 2 * self.kernels.shape[0]

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """``[B, 1, S, S]`` -> ``[B, channels, S, S]`` (raw image first)."""
        padded = nnf.pad(images, (self.radius,) * 4, mode="replicate")
        d = nnf.conv2d(padded, self.kernels)
        return torch.cat([images, nnf.relu(d), nnf.relu(-d)], dim=1)

    @staticmethod
    def patch_max(features: torch.Tensor, patch: int) -> torch.Tensor:
        """The rectified channels' max over each patch: ``[B, channels - 1, S/p, S/p]``."""
        return nnf.max_pool2d(features[:, 1:], patch)


class TinyCLIP(nn.Module):
    """Tiny CLIP (synthetic stand-in). ``seed`` fixes the initial weights (global RNG untouched).

    ``filter_bank`` (default ``"none"``: the spec's world) puts the fixed
    :class:`BlobFilterBank` in front of the patch embedding: ``"dog"`` feeds it the raw image
    and the rectified difference-of-Gaussians responses at 3 scales; ``"dog_max"`` also adds
    a linear embedding of those responses' per-patch maximum to each patch token, so a patch
    token carries a strong local blob cue by construction (as a pretrained CLIP's low-level
    features would) whatever the pooling keeps of it.
    """

    def __init__(
        self,
        image_size: int = 32,
        patch: int = 4,
        width: int = 64,
        depth: int = 4,
        heads: int = 4,
        embed_dim: int = 64,
        text_depth: int = 2,
        text_length: int = 14,
        seed: int = 0,
        pool: str = "cls",
        stem: int = 0,
        filter_bank: str = "none",
    ) -> None:
        super().__init__()
        if filter_bank not in FILTER_BANKS:
            raise ValueError(f"filter_bank must be one of {FILTER_BANKS}, got {filter_bank!r}")
        if pool not in ("cls", "mean"):
            raise ValueError(f"pool must be 'cls' or 'mean', got {pool!r}")
        if stem < 0:
            raise ValueError(f"stem must be >= 0 (0: no convolutional stem), got {stem}")
        self.pool = pool
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            g = image_size // patch
            self.grid = (g, g)
            self.image_size = image_size
            self.filters = BlobFilterBank() if filter_bank != "none" else None
            chans = self.filters.channels if self.filters is not None else 1
            self.stem = (
                nn.Sequential(nn.Conv2d(chans, stem, 3, padding=1), nn.GELU()) if stem else None
            )
            self.patch_embed = nn.Conv2d(stem or chans, width, patch, patch)
            self.patch = patch
            self.max_embed = nn.Conv2d(chans - 1, width, 1) if filter_bank == "dog_max" else None
            self.cls = nn.Parameter(0.02 * torch.randn(width))
            self.pos = nn.Parameter(0.02 * torch.randn(1 + g * g, width))
            self.blocks = nn.ModuleList(Block(width, heads) for _ in range(depth))
            self.ln_post = nn.LayerNorm(width)
            self.proj = nn.Parameter(width**-0.5 * torch.randn(width, embed_dim))
            self.tok = nn.Embedding(len(VOCAB), width)
            self.pos_t = nn.Parameter(0.02 * torch.randn(text_length, width))
            self.text_blocks = nn.ModuleList(Block(width, heads) for _ in range(text_depth))
            self.ln_final = nn.LayerNorm(width)
            self.text_proj = nn.Parameter(width**-0.5 * torch.randn(width, embed_dim))
            self.logit_scale = nn.Parameter(torch.tensor(float(np.log(1 / 0.07))))
        causal = torch.full((text_length, text_length), float("-inf")).triu(1)
        self.causal: torch.Tensor
        self.register_buffer("causal", causal, persistent=False)

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """Images ``[B, 1, S, S]`` -> tokens ``[B, 1 + N, d]`` (CLS + patches + positions)."""
        extra = None
        if self.filters is not None:
            images = self.filters(images)
            if self.max_embed is not None:
                extra = self.max_embed(BlobFilterBank.patch_max(images, self.patch))
        if self.stem is not None:
            images = self.stem(images)
        x = self.patch_embed(images)
        if extra is not None:
            x = x + extra
        x = x.flatten(2).transpose(1, 2)
        cls = self.cls.expand(x.shape[0], 1, -1)
        return torch.cat([cls, x], dim=1) + self.pos

    def head(self, tokens: torch.Tensor) -> torch.Tensor:
        """CLS pooling (``pool="cls"``) or the mean of the patch tokens' joint features.

        ``pool="mean"``: ``mean_i to_joint(z_i)`` over the patch tokens (the CLS token is
        computed but not read): every patch weighs 1/N in the embedding, so a lesion inside one
        patch is diluted by construction while its own token can still encode it.
        """
        if self.pool == "mean":
            return self.to_joint(tokens[:, 1:]).mean(dim=1)
        return self.ln_post(tokens[:, 0]) @ self.proj

    def to_joint(self, tokens: torch.Tensor) -> torch.Tensor:
        """Patch tokens into the joint space (final norm + projection, MaskCLIP-style)."""
        return self.ln_post(tokens) @ self.proj

    def encode_tokens(self, images: torch.Tensor) -> torch.Tensor:
        """The encoder's output tokens ``[B, 1 + N, d]`` (before the head)."""
        x = self.embed(images)
        for b in self.blocks:
            x = b(x)
        return x

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        """Image embeddings ``[B, E]``."""
        return self.head(self.encode_tokens(images))

    def encode_text(self, ids: torch.Tensor) -> torch.Tensor:
        """Text embeddings in the joint space."""
        x = self.tok(ids) + self.pos_t[: ids.shape[1]]
        mask = self.causal[: ids.shape[1], : ids.shape[1]]
        for b in self.text_blocks:
            x = b(x, attn_mask=mask)
        eot = (ids == VOCAB.index("<eot>")).int().argmax(dim=1)
        return self.ln_final(x[torch.arange(len(ids)), eot]) @ self.text_proj


def tiny_clip_adapter(model: TinyCLIP, tokenizer: TinyTokenizer | None = None) -> GenericViTAdapter:
    """A :class:`~easylens.adapters.GenericViTAdapter` over a TinyCLIP (text + to_joint)."""
    tok = tokenizer if tokenizer is not None else TinyTokenizer(model.pos_t.shape[0])
    return GenericViTAdapter(
        model.embed,
        list(model.blocks),
        model.head,
        model.grid,
        1,
        image_size=(model.image_size, model.image_size),
        text_fn=lambda texts: model.encode_text(tok(texts)),
        joint_fn=model.to_joint,
        model=model,
        in_chans=1,  # grayscale scans (the first Conv2d may sit after a fixed filter bank)
    )


def training_set(
    n: int, mix: tuple[float, float, float], seed: int
) -> tuple[torch.Tensor, list[str]]:
    """``n`` scans mixed normal / obvious / subtle and their reports."""
    gen = ScanGenerator(seed=seed)
    counts = np.floor(np.asarray(mix) * n).astype(int)
    counts[0] += n - counts.sum()
    batches = [
        gen.sample(int(c), r)
        for c, r in zip(counts, ("normal", "obvious", "subtle"), strict=True)
        if c
    ]
    images = torch.cat([b.images for b in batches])
    texts = [t for b in batches for t in reports(b)]
    return images, texts


def train_tiny_clip(
    seed: int = 0,
    n_train: int = 4000,
    steps: int = 4000,
    batch_size: int = 64,
    lr: float = 1e-3,
    mix: tuple[float, float, float] = (0.5, 0.425, 0.075),
    cache_dir: str | Path | None = None,
    progress: bool | None = None,
    pool: str = "cls",
    local_weight: float = 0.0,
    stem: int = 0,
    patch: int = 4,
    filter_bank: str = "none",
) -> tuple[TinyCLIP, TinyTokenizer]:
    """Train TinyCLIP from scratch with a CLIP loss (AdamW, cosine schedule).

    Named steps: look up the cache (:func:`cache_path`), build the training set
    (:func:`training_set`), run the steps (:func:`fit_clip`, loss :func:`clip_loss`), store.
    Reports that are identical within a batch are all positives (soft targets). With
    ``cache_dir`` the checkpoint is stored there, keyed by every argument but ``progress``
    (a bar over the training steps; None: on a terminal only). ``pool``: TinyCLIP's pooling
    (``"cls"``, the spec's, or ``"mean"``). ``local_weight``: weight of the patch-level
    alignment loss :func:`local_loss` added to the CLIP loss (0: the spec's training).
    ``stem``: channels of a 3 x 3 convolutional stem before the patch embedding (0: none);
    ``patch``: the ViT's patch size in pixels (the spec's 4: an 8 x 8 grid on 32 x 32 scans).
    ``filter_bank``: a fixed local-structure filter bank before the patch embedding
    (``"none"``, the spec's; ``"dog"`` / ``"dog_max"``, see :class:`TinyCLIP`).
    """
    cfg = {
        "seed": seed,
        "n_train": n_train,
        "steps": steps,
        "batch_size": batch_size,
        "lr": lr,
        "mix": list(mix),
        "version": 2,  # 2: "subtle" scans recalibrated (scans.REGIMES)
    }
    if pool != "cls":  # the key of a spec-world checkpoint is unchanged
        cfg["pool"] = pool
    if local_weight:
        cfg["local_weight"] = local_weight
    if stem:
        cfg["stem"] = stem
    if patch != 4:
        cfg["patch"] = patch
    if filter_bank != "none":
        cfg["filter_bank"] = filter_bank
    model = TinyCLIP(seed=seed, pool=pool, stem=stem, patch=patch, filter_bank=filter_bank)
    tok = TinyTokenizer()
    path = cache_path(cache_dir, cfg)
    if path is not None and path.exists():
        model.load_state_dict(torch.load(path, weights_only=True))
        return model.eval().requires_grad_(False), tok
    images, texts = training_set(n_train, mix, seed + 1000)
    fit_clip(model, tok, images, texts, steps, batch_size, lr, seed, progress, local_weight)
    model.eval().requires_grad_(False)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), path)
    return model, tok


def cache_path(cache_dir: str | Path | None, cfg: dict) -> Path | None:
    """``<cache_dir>/tinyclip-<hash of cfg>.pt`` (None without a cache directory)."""
    if cache_dir is None:
        return None
    key = hashlib.sha1(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:16]
    return Path(cache_dir) / f"tinyclip-{key}.pt"


def clip_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Symmetric CLIP loss over ``logits [B, unique reports]`` with report ids ``y [B]``.

    Image -> text: cross-entropy to the image's report. Text -> image: every image of the
    batch with the same report is a positive (soft target).
    """
    loss_i = nnf.cross_entropy(logits, y)
    same = (y[:, None] == y[None, :]).float()
    lt = logits[:, y].T  # text of image j vs image i
    loss_t = -(nnf.log_softmax(lt, dim=1) * same / same.sum(1, keepdim=True)).sum(1).mean()
    return 0.5 * (loss_i + loss_t)


def local_loss(
    patches: torch.Tensor,
    texts: torch.Tensor,
    is_lesion: torch.Tensor,
    normal: int,
    scale: torch.Tensor,
) -> torch.Tensor:
    """Patch-level (multiple-instance) alignment of the patch tokens with the report text.

    ``patches [B, N, E]`` and ``texts [T, E]`` are L2-normalised joint features, ``normal`` the
    index of the normal report. A patch's lesion logit is ``scale * <f_i, t+ - t->`` with
    ``t+`` the normalised mean of the lesion reports and ``t-`` the normal report; the image's
    logit is the max over its patches (a lesion anywhere), trained with binary cross-entropy
    against ``is_lesion [B]`` (image-level labels from the reports, no masks): every patch
    token is pushed to say, in the joint space, whether *it* holds a lesion (as the patch
    tokens of a large CLIP encode local structure), whatever the pooling reads.
    """
    keep = torch.ones(len(texts), dtype=torch.bool)
    keep[normal] = False
    t_pos = nnf.normalize(texts[keep].mean(0), dim=-1)
    logit = scale * (patches @ (t_pos - texts[normal])).amax(dim=1)
    return nnf.binary_cross_entropy_with_logits(logit, is_lesion)


def fit_clip(
    model: TinyCLIP,
    tok: TinyTokenizer,
    images: torch.Tensor,
    texts: list[str],
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    progress: bool | None = None,
    local_weight: float = 0.0,
) -> None:
    """``steps`` AdamW steps (warm-up then cosine decay) of :func:`clip_loss`, in place.

    With ``local_weight > 0`` the patch-level :func:`local_loss` is added with that weight.
    """
    unique = sorted(
        set(texts) | {report(None, None)} | {report(m, s) for m in MORPHOLOGIES for s in SIDES}
    )
    ids = tok(unique)
    label = torch.tensor([unique.index(t) for t in texts])
    normal = unique.index(report(None, None))
    lesion = torch.tensor([u != normal for u in range(len(unique))], dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda t: min(1.0, (t + 1) / warm) * 0.5 * (1 + np.cos(np.pi * min(t, steps) / steps))
    )
    model.train()
    for _ in show_progress(range(steps), enabled=progress, desc="TinyCLIP training"):
        idx = torch.randint(len(images), (batch_size,), generator=gen)
        tokens = model.encode_tokens(images[idx])
        gi = nnf.normalize(model.head(tokens), dim=-1)
        gt = nnf.normalize(model.encode_text(ids), dim=-1)
        scale = model.logit_scale.exp().clamp(max=100)
        loss = clip_loss(scale * gi @ gt.T, label[idx])  # logits [B, unique reports]
        if local_weight:
            patches = nnf.normalize(model.to_joint(tokens[:, 1:]), dim=-1)
            loss = loss + local_weight * local_loss(patches, gt, lesion[label[idx]], normal, scale)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
