"""EditRIS: referring segmentation from one earliest-timestep call of a frozen image editor.

Algorithm (one image I, expression r, editor eps_theta; "inferred" = not in the paper's
available text, see README):

1. c = template(r'), r' = r without its article; T_r = tokens of r' minus stop words.
2. One conditional call eps_theta(x_t0, t0, c_I, c) at the noisiest inference timestep t0,
   recording cross-attention A_l, self-attention at resolution R and decoder features F_l.
3. WHERE: a = mean_l resize_R(minmax(mean_heads mean_{k in T_r} A_l[..., k]));
   P = minmax(W^k a) with W the mean self-attention at R (k = 2, inferred).
4. WHAT: f = concat_l resize_R(F_l / ||F_l||); mu_fg = unit(sum_{P >= tau_hi} P_i f_i),
   mu_bg = spherical k-means (K = 3, inferred) of f on {P <= tau_lo};
   p_i = sigmoid((cos(f_i, mu_fg) - max_k cos(f_i, mu_bg_k)) / tau), n_refine EM rounds.
5. m = p^(1 - lam) P^lam, resized to the image, mask = m > 0.5.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.nn import functional as nnf

from edit_ris._validation import check_expressions, to_image_tensor
from edit_ris.backbones.base import Capture, CaptureError, CaptureSpec, EditingBackbone
from edit_ris.tokens import expression_token_span, strip_article
from methodkit.checks import check_int, check_real

_KINDS = ("cross_attn", "self_attn", "features")


def minmax(x: torch.Tensor) -> torch.Tensor:
    """Min-max normalise each sample over its trailing two dims (constant maps -> zeros)."""
    flat = x.flatten(-2)
    lo, hi = flat.min(-1, keepdim=True).values, flat.max(-1, keepdim=True).values
    rng = hi - lo
    out = torch.where(rng > 1e-12, (flat - lo) / rng.clamp_min(1e-12), torch.zeros_like(flat))
    return out.view_as(x)


def propagate_affinity(a: torch.Tensor, w: torch.Tensor, k: int = 2) -> torch.Tensor:
    """``P = minmax(W^k a)``: smooth a prior map (B, R, R) with a row-stochastic W (B, N, N)."""
    k = check_int("k_affinity", k, low=0)
    b, r1, r2 = a.shape
    v = a.reshape(b, r1 * r2, 1).to(w.dtype)
    for _ in range(k):
        v = w @ v
    out = v.view(b, r1, r2)
    return minmax(out) if k > 0 else out


def feature_affinity(f: torch.Tensor, tau_a: float = 0.1) -> torch.Tensor:
    """``W_ij = softmax_j(cos(f_i, f_j) / tau_a)`` for features (B, D, N)."""
    u = nnf.normalize(f, dim=1)
    return (u.transpose(1, 2) @ u / tau_a).softmax(-1)


def spherical_kmeans(x: torch.Tensor, k: int, order: torch.Tensor, n_iter: int = 10) -> Any:
    """Spherical k-means of unit rows ``x`` (n, D); deterministic farthest-point init.

    The first centroid is the row ``order[0]`` (the most background-like pixel), each next one
    the row least similar to the chosen centroids.

    Returns:
        Unit centroids (min(k, n), D).
    """
    k = max(1, min(int(k), x.shape[0]))
    cent = [x[order[0]]]
    for _ in range(1, k):
        sim = torch.stack([x @ c for c in cent], 1).max(1).values
        cent.append(x[int(sim.argmin())])
    c = torch.stack(cent)
    for _ in range(n_iter):
        assign = (x @ c.T).argmax(1)
        new = torch.zeros_like(c).index_add_(0, assign, x)
        keep = new.norm(dim=1) > 1e-12
        c = torch.where(keep[:, None], nnf.normalize(new, dim=1), c)
    return c


def prototype_probabilities(
    f: torch.Tensor, mu_fg: torch.Tensor, mu_bg: torch.Tensor, tau: float = 0.1
) -> torch.Tensor:
    """``p_i = sigmoid((cos(f_i, mu_fg) - max_k cos(f_i, mu_bg_k)) / tau)`` for f (N, D)."""
    u = nnf.normalize(f, dim=1)
    s_fg = u @ nnf.normalize(mu_fg, dim=0)
    s_bg = (u @ nnf.normalize(mu_bg, dim=1).T).max(1).values
    return torch.sigmoid((s_fg - s_bg) / tau)


@dataclass
class RISOutput:
    """What :meth:`EditRIS.predict` returns (numpy for numpy input, torch for torch input).

    Attributes:
        masks: bool (B, H, W).
        soft: fused map m resized to the image (B, H, W) in [0, 1].
        prior: the propagated attention prior P (B, R, R).
        feature_prob: the prototype probability p (B, R, R).
        attention: the raw attention prior a (B, R, R), before propagation.
        timestep: the timestep of the single denoiser call.
    """

    masks: object
    soft: object
    prior: object
    feature_prob: object
    attention: object
    timestep: int


class EditRIS:
    """Zero-shot referring image segmentation from one denoiser call of an image editor.

    The editor is asked to edit the referent (``template``, default ``"make the {ref} red"``);
    its denoiser runs once at the earliest inference timestep. Cross-attention on the
    expression's tokens, propagated by self-attention, says *where* (``P = minmax(W^k a)``);
    decoder features classified against a foreground prototype and K background prototypes say
    *what* (``p = sigmoid((cos(f, mu_fg) - max_k cos(f, mu_bg_k)) / tau)``); the mask is
    ``p^(1 - lam) P^lam > 0.5``.

    Args:
        backbone: A frozen :class:`~edit_ris.backbones.EditingBackbone` (never modified).
        template: Instruction template with one ``{ref}``, or a list of them (maps averaged,
            one call per template).
        layers: ``"auto"`` or a mapping ``{"cross_attn" | "self_attn" | "features": names}``
            (missing kinds stay automatic).
        k_affinity: Propagation power k (0 disables propagation).
        tau_hi: Foreground seed threshold on P.
        tau_lo: Background seed threshold on P.
        n_bg_prototypes: K of the spherical k-means of the background.
        tau: Temperature of the prototype classifier.
        lam: Fusion weight of P.
        n_refine: EM rounds re-estimating the prototypes from p.
        timestep: ``"earliest"``, an int timestep in [0, T) or a float fraction of T in (0, 1].
        seed: Seed of the noise latent.

    References:
        He, Wang, Wang, Zheng, Xu. "Early Semantic Grounding in Image Editing Models for
        Zero-Shot Referring Image Segmentation", arXiv:2605.13122.

    Example:
        >>> from edit_ris import EditRIS, TinyEditor, ShapeRefGenerator
        >>> from edit_ris.data.shapes import vocabulary
        >>> item = ShapeRefGenerator(seed=0).sample(1)[0]
        >>> out = EditRIS(TinyEditor(vocabulary())).predict(item.image[None], [item.expression])
        >>> out.masks.shape
        (1, 32, 32)
    """

    def __init__(
        self,
        backbone: EditingBackbone,
        template: str | Sequence[str] = "make the {ref} red",
        layers: str | Mapping[str, Sequence[str]] = "auto",
        k_affinity: int = 2,
        tau_hi: float = 0.7,
        tau_lo: float = 0.2,
        n_bg_prototypes: int = 3,
        tau: float = 0.1,
        lam: float = 0.3,
        n_refine: int = 1,
        timestep: str | int | float = "earliest",
        seed: int = 0,
    ) -> None:
        templates = [template] if isinstance(template, str) else list(template)
        if not templates:
            raise ValueError("template must be a str or a non-empty list of str")
        for tpl in templates:
            if not isinstance(tpl, str) or tpl.count("{ref}") != 1:
                raise ValueError(f"template must contain '{{ref}}' exactly once, got {tpl!r}")
        k_affinity = check_int("k_affinity", k_affinity, low=0)
        if not 0.0 <= tau_lo < tau_hi <= 1.0:
            raise ValueError(f"need 0 <= tau_lo < tau_hi <= 1, got {tau_lo}, {tau_hi}")
        n_bg_prototypes = check_int("n_bg_prototypes", n_bg_prototypes, low=1)
        tau = check_real("tau", tau, low=0.0, low_open=True)
        lam = check_real("lam", lam, 0.0, 1.0)
        n_refine = check_int("n_refine", n_refine, low=0)
        self.backbone = backbone
        self.templates = templates
        self.template = template
        self.layers = layers
        self.k_affinity = k_affinity
        self.tau_hi, self.tau_lo = float(tau_hi), float(tau_lo)
        self.n_bg_prototypes = n_bg_prototypes
        self.tau, self.lam, self.n_refine = float(tau), float(lam), n_refine
        self.timestep = timestep
        self.seed = check_int("seed", seed, low=0)
        self._selected = self._select_layers(layers)
        self.resolved_timestep = self._resolve_timestep(timestep)

    # -- configuration --------------------------------------------------------------------
    def _select_layers(self, layers: Any) -> dict[str, tuple[str, ...]]:
        info = self.backbone.layer_info()
        by_kind = {k: {li.name: li.resolution for li in info if li.kind == k} for k in _KINDS}
        if not by_kind["cross_attn"]:
            raise CaptureError("the backbone reports no capturable cross-attention layer")
        requested: Mapping[str, Sequence[str]] = {}
        if layers != "auto":
            if not isinstance(layers, Mapping) or set(layers) - set(_KINDS):
                raise ValueError(f"layers must be 'auto' or a mapping with keys in {_KINDS}")
            requested = layers
        for kind, names in requested.items():
            absent = [n for n in names if n not in by_kind[kind]]
            if absent or not names:
                raise ValueError(
                    f"requested {kind} layers {absent or list(names)} are absent from "
                    f"layer_info(); available: {sorted(by_kind[kind])}"
                )
        sa = by_kind["self_attn"]
        res_r = max((r for r in sa.values() if r <= 32), default=None)
        if res_r is None:
            res_r = max(by_kind["cross_attn"].values())
        out = {}
        for kind in _KINDS:
            if kind in requested:
                out[kind] = tuple(requested[kind])
            elif kind == "self_attn":
                out[kind] = tuple(n for n, r in sa.items() if r == res_r)
            else:
                out[kind] = tuple(
                    n for n, r in by_kind[kind].items() if res_r / 2 <= r <= res_r
                ) or tuple(by_kind[kind])
        return out

    def _resolve_timestep(self, timestep: Any) -> int:
        big_t = int(self.backbone.num_train_timesteps)
        if timestep == "earliest":
            return int(self.backbone.earliest_timestep())
        if isinstance(timestep, bool) or not isinstance(timestep, (int, float, np.number)):
            raise ValueError(f"timestep must be 'earliest', an int or a float, got {timestep!r}")
        if isinstance(timestep, (int, np.integer)):
            if not 0 <= int(timestep) < big_t:
                raise ValueError(f"timestep {timestep} is not in the schedule [0, {big_t})")
            return int(timestep)
        if not 0.0 < float(timestep) <= 1.0:
            raise ValueError(f"a float timestep is a fraction of T in (0, 1], got {timestep}")
        return max(0, int(round(float(timestep) * big_t)) - 1)  # noqa: RUF046 (numpy scalars)

    def capture_spec(self) -> CaptureSpec:
        """The layers one call records."""
        s = self._selected
        return CaptureSpec(s["cross_attn"], s["self_attn"], s["features"])

    # -- the two branches (reusable) ------------------------------------------------------
    def spatial_prior(
        self, capture: Capture, spans: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """WHERE: ``(a, P)``, both (B, R, R), from a capture and the token spans T_r."""
        names = [n for n in self._selected["cross_attn"] if n in capture.cross_attn]
        if not names:
            raise CaptureError(
                "no cross-attention was captured: the backbone's attention processors are "
                "fused or compiled; use standard processors"
            )
        res_r = self._working_resolution(capture)
        maps = []
        for n in names:
            att = capture.cross_attn[n].float()  # (B, heads, HW, L)
            side = int(round(att.shape[2] ** 0.5))  # noqa: RUF046 (numpy scalars)
            if not res_r / 2 <= side <= res_r and self.layers == "auto":
                continue
            per = torch.stack([att[i][:, :, list(sp)].mean((0, 2)) for i, sp in enumerate(spans)])
            m = minmax(per.view(-1, side, side))
            maps.append(nnf.interpolate(m[:, None], size=(res_r, res_r), mode="bilinear")[:, 0])
        if not maps:
            raise CaptureError(f"no cross-attention layer at resolutions [{res_r / 2}, {res_r}]")
        a = torch.stack(maps).mean(0)
        if self.k_affinity == 0:
            return a, a.clone()
        if capture.self_attn:
            w = torch.stack([capture.self_attn[n].float() for n in capture.self_attn]).mean(0)
        else:
            w = feature_affinity(self._features(capture, res_r).flatten(2))
        return a, propagate_affinity(a, w, self.k_affinity)

    def _working_resolution(self, capture: Capture) -> int:
        if capture.self_attn:
            return int(round(next(iter(capture.self_attn.values())).shape[-1] ** 0.5))  # noqa: RUF046 (numpy scalars)
        sides = [int(round(v.shape[2] ** 0.5)) for v in capture.cross_attn.values()]  # noqa: RUF046 (numpy scalars)
        return max(s for s in sides)

    def _features(self, capture: Capture, res_r: int) -> torch.Tensor:
        names = [n for n in self._selected["features"] if n in capture.features]
        if not names:
            raise CaptureError("no decoder features were captured")
        feats = [
            nnf.interpolate(
                nnf.normalize(capture.features[n].float(), dim=1),
                size=(res_r, res_r),
                mode="bilinear",
            )
            for n in names
        ]
        return torch.cat(feats, dim=1)  # (B, D, R, R)

    def discriminate(self, capture: Capture, prior: torch.Tensor) -> torch.Tensor:
        """WHAT: prototype probability p (B, R, R) from decoder features and the prior P."""
        b, res_r, _ = prior.shape
        f = nnf.normalize(self._features(capture, res_r).flatten(2), dim=1)  # (B, D, N)
        out = []
        for i in range(b):
            out.append(self._discriminate_one(f[i].T, prior[i].flatten()).view(res_r, res_r))
        return torch.stack(out)

    def _discriminate_one(self, f: torch.Tensor, pr: torch.Tensor) -> torch.Tensor:
        fg = pr >= self.tau_hi
        if not bool(fg.any()):
            fg = pr == pr.max()
        bg = pr <= self.tau_lo
        if not bool(bg.any()):  # no clear background: the lower half of the prior (inferred)
            bg = pr <= pr.median()
        weights = pr
        p = self._classify(f, fg, weights, bg, pr)
        for _ in range(self.n_refine):  # EM: prototypes from p (inferred)
            fg = p >= 0.5
            if not bool(fg.any()):
                fg = p == p.max()
            bg = ~fg
            if not bool(bg.any()):
                break
            p = self._classify(f, fg, p, bg, p)
        return p

    def _classify(self, f: Any, fg: Any, weights: Any, bg: Any, score: Any) -> torch.Tensor:
        mu_fg = nnf.normalize((weights[fg, None] * f[fg]).sum(0), dim=0)
        idx_bg = torch.nonzero(bg).flatten()
        order = torch.argsort(score[idx_bg])
        mu_bg = spherical_kmeans(f[idx_bg], self.n_bg_prototypes, order)
        return prototype_probabilities(f, mu_fg, mu_bg, self.tau)

    # -- predict --------------------------------------------------------------------------
    def instructions(self, expressions: Sequence[str], template: str) -> list[tuple[str, str, int]]:
        """``(instruction, r', start of r')`` for each expression."""
        pre = template.index("{ref}")
        out = []
        for e in expressions:
            ref = strip_article(e)
            out.append((template.replace("{ref}", ref), ref, pre))
        return out

    def run_capture(self, images: torch.Tensor, expressions: Sequence[str], template: str) -> Any:
        """The single denoiser call for one template: ``(capture, spans)``."""
        rows = self.instructions(expressions, template)
        spans = [expression_token_span(self.backbone, ins, ref, start=s) for ins, ref, s in rows]
        cap = self.backbone.forward_capture(
            images,
            [r[0] for r in rows],
            self.resolved_timestep,
            self.seed,
            capture=self.capture_spec(),
        )
        return cap, spans

    @torch.no_grad()
    def predict(self, images: Any, expressions: Sequence[str]) -> RISOutput:
        """Segment the referent of each expression in its image.

        Args:
            images: float (B, 3, H, W) in [0, 1] (numpy or torch) or a list of PIL images.
            expressions: One referring expression per image.

        Returns:
            :class:`RISOutput`; numpy arrays for numpy/PIL input, tensors for torch input.

        Raises:
            ValueError: Empty or all-stop-word expressions, a truncated expression, a length
                mismatch, images out of range or of a size the backbone cannot take.
            TypeError: Non-floating images or expressions that are not str.
            CaptureError: If the backbone's attention cannot be captured.
        """
        x, was_numpy = to_image_tensor(images, getattr(self.backbone, "size_multiple", 1))
        exprs = check_expressions(expressions, x.shape[0])
        for e in exprs:
            strip_article(e)
        acc: list[torch.Tensor] = []
        for tpl in self.templates:  # at least one (checked in __init__)
            cap, spans = self.run_capture(x, exprs, tpl)
            a, pr = self.spatial_prior(cap, spans)
            p = self.discriminate(cap, pr)
            m = p.clamp(0, 1) ** (1.0 - self.lam) * pr.clamp(0, 1) ** self.lam
            parts = [a, pr, p, m]
            acc = parts if not acc else [u + v for u, v in zip(acc, parts, strict=True)]
        a, pr, p, m = (v / len(self.templates) for v in acc)
        soft = nnf.interpolate(m[:, None], size=x.shape[-2:], mode="bilinear")[:, 0].clamp(0, 1)
        masks = soft > 0.5
        vals: list[object] = [masks, soft, pr, p, a]
        if was_numpy:
            vals = [v.cpu().numpy() for v in (masks, soft, pr, p, a)]
        masks_o, soft_o, prior_o, prob_o, attn_o = vals
        return RISOutput(masks_o, soft_o, prior_o, prob_o, attn_o, self.resolved_timestep)
