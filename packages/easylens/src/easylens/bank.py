"""EasyBank: lesion prototypes and anatomy-aware normal references (built once, no training)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as nnf

from easylens._kmeans import spherical_kmeans
from easylens._validation import check_choice, check_nonneg, check_positive_int
from methodkit import progress as show_progress

MIN_NORMAL_REFERENCES = 4
_TENSORS = (
    "normal_feats",
    "lesion_protos",
    "lesion_protos_tokens",
    "margin_mu",
    "margin_sigma",
    "lesion_mu",
    "lesion_sigma",
)
_META = (
    "layer",
    "reference",
    "window",
    "grid_size",
    "num_prefix_tokens",
    "width",
    "feature_space",
    "backbone_id",
    "seed",
    "n_references",
    "lesion_sources",
)


def resolve_layer(adapter: Any, layer: int | str) -> int:
    """``"auto"`` -> ``max(1, round(L / 3))``; an int is checked against ``[1, L-1]``."""
    if layer == "auto":
        return max(1, round(adapter.num_layers / 3))
    return adapter.layer_index(layer)


def neighbours(grid: tuple[int, int], window: int) -> torch.Tensor:
    """``[N, (2r+1)^2]`` flat indices of the positions in each window (-1 outside the grid)."""
    h, w = grid
    ys, xs = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    out = []
    for dy in range(-window, window + 1):
        for dx in range(-window, window + 1):
            y, x = ys + dy, xs + dx
            ok = (y >= 0) & (y < h) & (x >= 0) & (x < w)
            out.append(np.where(ok, y * w + x, -1).ravel())
    return torch.as_tensor(np.stack(out, axis=1), dtype=torch.long)


@dataclass
class EasyBank:
    """Pathology-anatomy prototype space (EasyBank; the construction is inferred).

    Normal references come from normal images at the working layer: every token with its grid
    position (``reference="position"``; ``A(i)`` = the ``(2r+1)^2`` window around ``i``) or
    spherical k-means centroids (``"cluster"``; ``A(i)`` = all centroids). Lesion prototypes
    are the k-means centres of the lesion-image tokens farthest from their normal
    counterfactual (top ``q``), of mean tokens inside lesion masks, and/or text embeddings.
    The EasyTag margin is calibrated (mean, std per position or centroid) on held-out normals.

    Build with :meth:`build`; ``save``/``load`` round-trip exactly.
    """

    layer: int
    reference: str
    window: int
    grid_size: tuple[int, int]
    num_prefix_tokens: int
    width: int
    feature_space: str
    backbone_id: str
    seed: int
    n_references: int
    lesion_sources: tuple[str, ...]
    normal_feats: torch.Tensor  # [M, d'] unit, position: M = R * N (index r * N + j)
    normal_tokens: dict[int, torch.Tensor]  # layer -> [M, d] unit token-space counterparts
    lesion_protos: torch.Tensor  # [K, d'] unit
    lesion_protos_tokens: torch.Tensor | None  # [K, d] unit (token-space banks only)
    margin_mu: torch.Tensor
    margin_sigma: torch.Tensor
    lesion_mu: torch.Tensor
    lesion_sigma: torch.Tensor
    _nbr: torch.Tensor | None = field(default=None, repr=False)

    # -- construction ------------------------------------------------------------------------
    @classmethod
    @torch.no_grad()
    def build(
        cls,
        adapter: Any,
        normal_images: torch.Tensor,
        lesion_images: torch.Tensor | None = None,
        lesion_masks: torch.Tensor | None = None,
        lesion_texts: Sequence[str] | None = None,
        layer: int | str = "auto",
        reference: str = "position",
        window: int = 1,
        n_normal_clusters: int = 32,
        n_lesion_prototypes: int = 8,
        top_q: float = 0.03,
        calibration_fraction: float = 0.5,
        seed: int = 0,
        extra_layers: Sequence[int] = (),
        batch_size: int = 64,
        progress: bool | None = None,
    ) -> EasyBank:
        """Build the bank from image-level labels (no gradient, no weight change).

        Named steps: validate, split the normals (:func:`split_normals`), store the normal
        references (:meth:`from_references`), add lesion prototypes, calibrate the margin.

        Args:
            adapter: A :class:`~easylens.adapters.TokenEncoderAdapter`.
            normal_images: ``[n_N, C, H, W]`` normal images (references + calibration).
            lesion_images: ``[n_L, C, H, W]`` images with a lesion (exemplar source).
            lesion_masks: ``[n_L, H, W]`` bool lesion masks of ``lesion_images`` (optional).
            lesion_texts: Lesion descriptions (joint space; needs ``encode_text``/``to_joint``).
            layer: Working layer (tokens entering block ``layer``), ``"auto"`` = round(L/3).
            reference: ``"position"`` or ``"cluster"``.
            window: ``r`` of the position window.
            n_normal_clusters: ``K_N`` (cluster mode).
            n_lesion_prototypes: ``K_L`` per source.
            top_q: Share of lesion-image tokens kept as exemplars (farthest from normal).
            calibration_fraction: Share of ``normal_images`` held out for calibration.
            seed: Seed of the split and the k-means.
            extra_layers: More layers whose token-space counterfactuals are stored (for
                ``EasyLens(tag_layer=bank.layer, layer=l)`` with ``l != bank.layer``).
            batch_size: Images per forward.
            progress: Progress bar over the forwards (None: on a terminal only).
        """
        layer = resolve_layer(adapter, layer)
        layers = [layer, *sorted({adapter.layer_index(int(x)) for x in extra_layers} - {layer})]
        check_build_config(reference, window, n_normal_clusters, n_lesion_prototypes, top_q)
        texts = check_lesion_sources(adapter, lesion_images, lesion_masks, lesion_texts)
        ref_imgs, cal_imgs = split_normals(adapter, normal_images, calibration_fraction, seed)
        lesion = None if lesion_images is None else adapter.check_images(lesion_images)
        encode = TokenReader(adapter, bool(texts), batch_size, progress)
        bank = cls.from_references(
            encode, ref_imgs, layers, reference, window, n_normal_clusters, seed
        )
        bank._add_lesion_prototypes(encode, lesion, lesion_masks, texts, n_lesion_prototypes, top_q)
        bank._calibrate(encode.features(encode.tokens(cal_imgs, layer)))
        return bank

    @classmethod
    def from_references(
        cls,
        encode: TokenReader,
        images: torch.Tensor,
        layers: Sequence[int],
        reference: str,
        window: int,
        n_clusters: int,
        seed: int,
    ) -> EasyBank:
        """A bank of the normal references of ``images`` only (no prototypes, uncalibrated).

        ``layers[0]`` is the working layer; the others only store token-space counterfactuals.
        """
        adapter, layer = encode.adapter, layers[0]
        tok = {lay: encode.tokens(images, lay) for lay in layers}
        normal_feats, normal_tokens = normal_references(
            encode.features(tok[layer]), tok, adapter, reference, n_clusters, seed
        )
        return cls(
            layer=layer,
            reference=reference,
            window=window,
            grid_size=tuple(adapter.grid_size),
            num_prefix_tokens=adapter.num_prefix_tokens,
            width=tok[layer].shape[-1],
            feature_space="joint" if encode.joint else "token",
            backbone_id=adapter.backbone_id,
            seed=seed,
            n_references=len(images),
            lesion_sources=(),
            normal_feats=normal_feats,
            normal_tokens=normal_tokens,
            lesion_protos=torch.zeros(0, normal_feats.shape[1]),
            lesion_protos_tokens=None,
            margin_mu=torch.zeros(1),
            margin_sigma=torch.ones(1),
            lesion_mu=torch.zeros(1),
            lesion_sigma=torch.ones(1),
        )

    def _add_lesion_prototypes(
        self,
        encode: TokenReader,
        images: torch.Tensor | None,
        masks: torch.Tensor | None,
        texts: list[str],
        k: int,
        top_q: float,
    ) -> None:
        protos, sources = [], []
        if images is not None:
            z = encode.features(encode.tokens(images, self.layer))  # [n_L, N, d']
            _, m_star = self.counterfactual(z)
            e_n = (z * self.normal_feats[m_star]).sum(-1)
            dist = (1 - e_n).reshape(-1)
            n_keep = max(1, int(np.ceil(top_q * dist.numel())))
            far = dist.topk(n_keep).indices  # exemplars: farthest from their normal counterpart
            pool = z.reshape(-1, z.shape[-1])[far]
            protos.append(spherical_kmeans(pool, k, self.seed).float())
            sources.append("exemplars")
            if masks is not None:
                pm = patch_masks(masks, self.grid_size).reshape(len(masks), -1)
                has = pm.any(1)
                if not bool(has.any()):
                    raise ValueError("every lesion mask is empty on the patch grid")
                w = pm[has].float()
                mean = nnf.normalize((w.unsqueeze(-1) * z[has]).sum(1), dim=-1)
                protos.append(spherical_kmeans(mean, k, self.seed + 1).float())
                sources.append("masks")
        if texts:
            t = nnf.normalize(encode.adapter.encode_text(texts).float(), dim=-1)
            protos.append(t)
            sources.append("text")
        self.lesion_protos = torch.cat(protos)
        self.lesion_sources = tuple(sources)
        if self.feature_space == "token":
            self.lesion_protos_tokens = self.lesion_protos.clone()
        else:
            self.lesion_protos_tokens = None

    def _calibrate(self, cal_feats: torch.Tensor) -> None:
        from easylens.tag import evidence

        e_l, _, e_n, _, group = evidence(cal_feats, self)
        n_groups = cal_feats.shape[1] if self.reference == "position" else len(self.normal_feats)
        self.margin_mu, self.margin_sigma = _group_stats(e_l - e_n, group, n_groups)
        self.lesion_mu, self.lesion_sigma = _group_stats(e_l, group, n_groups)

    # -- queries -----------------------------------------------------------------------------
    @property
    def num_patches(self) -> int:
        """``N``."""
        return self.grid_size[0] * self.grid_size[1]

    def patch_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """The patch part of ``[B, P + N, d]`` (or ``[B, N, d]`` unchanged), width checked."""
        if tokens.ndim != 3:
            raise ValueError(f"tokens must be [B, T, d], got shape {tuple(tokens.shape)}")
        if tokens.shape[-1] != self.width:
            raise ValueError(
                f"tokens have width {tokens.shape[-1]} but the bank was built with width "
                f"{self.width}"
            )
        n = self.num_patches
        if tokens.shape[1] == n + self.num_prefix_tokens:
            return tokens[:, self.num_prefix_tokens :]
        if tokens.shape[1] == n:
            return tokens
        raise ValueError(
            f"tokens hold {tokens.shape[1]} tokens but the bank's grid {self.grid_size} needs "
            f"{n} patches (+ {self.num_prefix_tokens} prefix tokens)"
        )

    def counterfactual(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(e_N, m*)``: best normal reference in ``A(i)`` for unit features ``[B, N, d']``."""
        z = z.to(self.normal_feats.dtype)
        if self.reference == "cluster":
            return (z @ self.normal_feats.T).max(dim=-1)
        n = self.num_patches
        if z.shape[1] != n:
            raise ValueError(
                f"reference='position' needs {n} patches (grid {self.grid_size}), got {z.shape[1]}"
            )
        if self._nbr is None:
            self._nbr = neighbours(self.grid_size, self.window)
        refs = self.normal_feats.reshape(self.n_references, n, -1)  # [R, N, d']
        best = torch.full(z.shape[:2], float("-inf"), dtype=z.dtype, device=z.device)
        arg = torch.zeros(z.shape[:2], dtype=torch.long, device=z.device)
        nbr = self._nbr.to(z.device)
        for k in range(nbr.shape[1]):
            j = nbr[:, k]
            ok = j >= 0
            jc = j.clamp_min(0)
            sims = torch.einsum("bnd,rnd->bnr", z, refs[:, jc])  # [B, N, R]
            sims = sims.masked_fill(~ok.view(1, n, 1), float("-inf"))
            val, r = sims.max(dim=-1)
            better = val > best
            best = torch.where(better, val, best)
            arg = torch.where(better, r * n + jc, arg)
        return best, arg

    def residual_targets(
        self, tag: Any, layer: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Unit token-space ``n*(i)`` (and ``p_k*(i)``) at ``layer`` for a :class:`TagResult`."""
        layer = self.layer if layer is None else layer
        if layer not in self.normal_tokens:
            raise ValueError(
                f"the bank stores counterfactuals at layers {sorted(self.normal_tokens)}, "
                f"not {layer} "
                "(build it with extra_layers=[...])"
            )
        cf = self.normal_tokens[layer][tag.counterfactual_index]
        proto = None
        if self.lesion_protos_tokens is not None and layer == self.layer:
            proto = self.lesion_protos_tokens[tag.prototype_index]
        return cf, proto

    def check_compatible(self, adapter: Any, layer: int) -> None:
        """Raise ``ValueError`` if the bank was built for another backbone, layer or grid."""
        if self.backbone_id != adapter.backbone_id:
            raise ValueError(
                f"the bank was built with backbone {self.backbone_id!r}, "
                f"not {adapter.backbone_id!r}"
            )
        if self.layer != layer:
            raise ValueError(
                f"the bank was built at layer {self.layer}, but tagging reads layer {layer}"
            )
        if tuple(self.grid_size) != tuple(adapter.grid_size):
            raise ValueError(
                f"the bank's grid {self.grid_size} differs from the adapter's {adapter.grid_size}"
            )

    # -- persistence -------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write tensors and metadata to ``path`` (``torch.save``; reload with :meth:`load`)."""
        state: dict[str, Any] = {k: getattr(self, k) for k in _TENSORS}
        state["normal_tokens"] = dict(self.normal_tokens)
        state["meta"] = {k: getattr(self, k) for k in _META}
        torch.save(state, Path(path))

    @classmethod
    def load(cls, path: str | Path) -> EasyBank:
        """Read a bank written by :meth:`save`."""
        state = torch.load(Path(path), weights_only=True)
        meta = dict(state.pop("meta"))
        meta["grid_size"] = tuple(meta["grid_size"])
        meta["lesion_sources"] = tuple(meta["lesion_sources"])
        return cls(**meta, **state)


def check_build_config(
    reference: str, window: int, n_normal_clusters: int, n_lesion_prototypes: int, top_q: float
) -> None:
    """Validate the scalar settings of :meth:`EasyBank.build`."""
    check_choice(reference, "reference", ("position", "cluster"))
    check_positive_int(window, "window", minimum=0)
    check_positive_int(n_normal_clusters, "n_normal_clusters")
    check_positive_int(n_lesion_prototypes, "n_lesion_prototypes")
    if not 0 < check_nonneg(top_q, "top_q") <= 1:
        raise ValueError(f"top_q must be in (0, 1], got {top_q}")


def check_lesion_sources(
    adapter: Any,
    lesion_images: torch.Tensor | None,
    lesion_masks: torch.Tensor | None,
    lesion_texts: Sequence[str] | None,
) -> list[str]:
    """Validate the lesion sources (at least one; masks match images); returns the texts."""
    texts = list(lesion_texts) if lesion_texts is not None else []
    if lesion_images is None and lesion_masks is None and not texts:
        raise ValueError(
            "the lesion source is empty: give lesion_images, lesion_masks or lesion_texts"
        )
    if lesion_masks is not None:
        if lesion_images is None:
            raise ValueError("lesion_masks need the lesion_images they outline")
        if tuple(lesion_masks.shape) != (lesion_images.shape[0], *lesion_images.shape[-2:]):
            raise ValueError(
                f"lesion_masks have shape {tuple(lesion_masks.shape)} but the lesion images "
                f"need {(lesion_images.shape[0], *lesion_images.shape[-2:])}"
            )
    if texts and not (adapter.has_text and adapter.has_joint):
        raise ValueError("lesion_texts need an adapter with a text encoder and to_joint")
    return texts


def split_normals(
    adapter: Any, normal_images: torch.Tensor, calibration_fraction: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded split of the normal images into references and calibration images."""
    if not 0 < check_nonneg(calibration_fraction, "calibration_fraction") < 1:
        raise ValueError(f"calibration_fraction must be in (0, 1), got {calibration_fraction}")
    normal_images = adapter.check_images(normal_images)
    n_cal = round(calibration_fraction * len(normal_images))
    n_ref = len(normal_images) - n_cal
    if n_ref < MIN_NORMAL_REFERENCES or n_cal < 2:
        raise ValueError(
            f"need at least {MIN_NORMAL_REFERENCES} normal reference images and 2 calibration "
            f"images, got {n_ref} references and {n_cal} calibration images from "
            f"{len(normal_images)} normal images (calibration_fraction={calibration_fraction})"
        )
    perm = np.random.default_rng(seed).permutation(len(normal_images))
    return normal_images[perm[:n_ref]], normal_images[perm[n_ref:]]


class TokenReader:
    """Batched token reads at a layer and their unit features (token or joint space)."""

    def __init__(self, adapter: Any, joint: bool, batch_size: int, progress: bool | None) -> None:
        self.adapter, self.joint = adapter, joint
        self.batch_size = check_positive_int(batch_size, "batch_size")
        self.progress = progress

    def tokens(self, images: torch.Tensor, layer: int) -> torch.Tensor:
        """Tokens entering block ``layer`` for ``images``, ``[B, P + N, d]``."""
        starts = range(0, len(images), self.batch_size)
        bar = show_progress(starts, enabled=self.progress, desc=f"EasyBank tokens (layer {layer})")
        chunks = [self.adapter.tokens_at(images[i : i + self.batch_size], layer) for i in bar]
        tok = torch.cat(chunks)
        n_tok = tok.shape[1] - self.adapter.num_prefix_tokens
        if n_tok != self.adapter.num_patches:
            raise ValueError(
                f"the adapter yields {n_tok} patch tokens but its grid is {self.adapter.grid_size}"
            )
        return tok

    def features(self, tok: torch.Tensor) -> torch.Tensor:
        """Unit patch features ``[B, N, d']`` (after ``to_joint`` for a joint-space bank)."""
        z = tok[:, self.adapter.num_prefix_tokens :]
        return nnf.normalize((self.adapter.to_joint(z) if self.joint else z).float(), dim=-1)


def normal_references(
    ref_feat: torch.Tensor,
    tok_ref: dict[int, torch.Tensor],
    adapter: Any,
    reference: str,
    n_clusters: int,
    seed: int,
) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
    """``(normal_feats, normal_tokens)``: every token by position, or k-means centroids.

    ``normal_tokens[layer]`` holds the unit token-space counterpart of each reference at each
    stored layer (the residual's ``n*(i)``); in cluster mode the mean member direction.
    """
    p = adapter.num_prefix_tokens
    unit_tok = {lay: nnf.normalize(t[:, p:].float(), dim=-1) for lay, t in tok_ref.items()}
    flat = ref_feat.reshape(-1, ref_feat.shape[-1])
    if reference == "position":
        return flat, {lay: t.reshape(-1, t.shape[-1]) for lay, t in unit_tok.items()}
    if flat.shape[0] < n_clusters:
        raise ValueError(
            f"{flat.shape[0]} normal tokens are fewer than n_normal_clusters={n_clusters}"
        )
    normal_feats = spherical_kmeans(flat, n_clusters, seed).float()
    assign = (flat @ normal_feats.T).argmax(1)
    normal_tokens = {}
    for lay, t in unit_tok.items():
        d = t.shape[-1]
        sums = torch.zeros(len(normal_feats), d).index_add_(0, assign, t.reshape(-1, d))
        normal_tokens[lay] = nnf.normalize(sums, dim=-1)
    return normal_feats, normal_tokens


def _group_stats(
    x: torch.Tensor, group: torch.Tensor, n_groups: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std of ``x`` per group (groups with < 2 members fall back to the global)."""
    x, g = x.reshape(-1).double(), group.reshape(-1)
    cnt = torch.bincount(g, minlength=n_groups).double()
    s1 = torch.zeros(n_groups, dtype=torch.double).index_add_(0, g, x)
    s2 = torch.zeros(n_groups, dtype=torch.double).index_add_(0, g, x * x)
    mu = s1 / cnt.clamp_min(1)
    var = (s2 / cnt.clamp_min(1) - mu**2) * cnt / (cnt - 1).clamp_min(1)
    few = cnt < 2
    mu[few] = x.mean()
    var[few] = x.var()
    sigma = var.clamp_min(0).sqrt().clamp_min(1e-6)
    return mu.float(), sigma.float()


def patch_masks(masks: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """Pixel masks ``[B, H, W]`` -> patch masks ``[B, gh, gw]`` (a patch is on if any pixel is)."""
    b, h, w = masks.shape
    gh, gw = grid
    if h % gh or w % gw:
        raise ValueError(f"mask size {(h, w)} is not a multiple of the grid {grid}")
    m = masks.bool().reshape(b, gh, h // gh, gw, w // gw)
    return m.any(dim=4).any(dim=2)
