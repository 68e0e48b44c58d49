"""What EditRIS is compared with (the spec's baselines; all zero-shot, none trained on masks).

Every baseline has ``predict(images, expressions) -> bool masks (B, H, W)`` (numpy for numpy
input, torch for torch input) and, where it calls the denoiser, uses the same instruction
template as the method.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from scipy.ndimage import gaussian_filter
from torch.nn import functional as nnf

from edit_ris._edit_ris import EditRIS, minmax
from edit_ris._validation import check_expressions, to_image_tensor
from edit_ris.tokens import strip_article
from methodkit.checks import check_int, check_real

__all__ = [
    "AttentionAffinity",
    "AttentionOnly",
    "CenterPrior",
    "EditDifference",
    "FeatureOnly",
    "LateTimestep",
    "NoiseDifference",
    "OneStepDifference",
    "otsu_threshold",
]


def otsu_threshold(values: np.ndarray, bins: int = 256) -> float:
    """Otsu's threshold of the values (maximises the between-class variance).

    Raises:
        ValueError: If ``values`` is empty or holds NaN or infinite entries.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        raise ValueError("values is empty: Otsu's threshold needs at least one value")
    if not np.isfinite(v).all():
        raise ValueError(f"values contain {int((~np.isfinite(v)).sum())} NaN or infinite entries")
    lo, hi = float(v.min()), float(v.max())
    if hi - lo < 1e-12:
        return hi
    hist, edges = np.histogram(v, bins=bins, range=(lo, hi))
    centers = (edges[:-1] + edges[1:]) / 2
    w0 = np.cumsum(hist)
    w1 = w0[-1] - w0
    m0 = np.cumsum(hist * centers) / np.maximum(w0, 1)
    m1 = (np.sum(hist * centers) - np.cumsum(hist * centers)) / np.maximum(w1, 1)
    between = w0 * w1 * (m0 - m1) ** 2
    return float(centers[int(np.argmax(between[:-1]))])


def _out(masks: torch.Tensor, was_numpy: bool) -> Any:
    return masks.cpu().numpy() if was_numpy else masks


def _otsu_masks(diff: torch.Tensor, size: Any, smooth: float) -> torch.Tensor:
    """Per-image Otsu mask of a difference map (B, h, w), resized to ``size``."""
    d = nnf.interpolate(diff[:, None].float(), size=size, mode="bilinear")[:, 0].cpu().numpy()
    out = []
    for m in d:
        if smooth > 0:
            m = gaussian_filter(m, smooth)
        out.append(m > otsu_threshold(m))
    return torch.from_numpy(np.stack(out))


class CenterPrior:
    """A Gaussian at the image centre, thresholded (no model, no language).

    Args:
        sigma: Standard deviation as a fraction of the image side.
        threshold: Threshold on the peak-normalised Gaussian, in (0, 1].

    Raises:
        ValueError: For ``sigma <= 0`` or a threshold outside (0, 1] (NaN included).
    """

    def __init__(self, sigma: float = 0.15, threshold: float = 0.5) -> None:
        if not sigma > 0 or not np.isfinite(sigma):
            raise ValueError(f"sigma must be a finite number > 0, got {sigma}")
        self.sigma = float(sigma)
        self.threshold = check_real("threshold", threshold, 0.0, 1.0, low_open=True)

    def predict(self, images: Any, expressions: Sequence[str]) -> Any:
        """Same centred disc for every image."""
        x, was_numpy = to_image_tensor(images)
        check_expressions(expressions, x.shape[0])
        h, w = x.shape[-2:]
        yy = (torch.arange(h) + 0.5 - h / 2) / (self.sigma * h)
        xx = (torch.arange(w) + 0.5 - w / 2) / (self.sigma * w)
        g = torch.exp(-0.5 * (yy[:, None] ** 2 + xx[None] ** 2))
        return _out((g > self.threshold).expand(x.shape[0], h, w).clone(), was_numpy)


class _PriorThreshold(EditRIS):
    use_propagation = False

    def predict(self, images: Any, expressions: Sequence[str]) -> Any:
        """Threshold the (min-max normalised) attention prior at 0.5."""
        x, was_numpy = to_image_tensor(images, getattr(self.backbone, "size_multiple", 1))
        exprs = check_expressions(expressions, x.shape[0])
        with torch.no_grad():
            maps = []
            for tpl in self.templates:
                cap, spans = self.run_capture(x, exprs, tpl)
                a, pr = self.spatial_prior(cap, spans)
                maps.append(pr if self.use_propagation else minmax(a))
            m = torch.stack(maps).mean(0)
            soft = nnf.interpolate(m[:, None], size=x.shape[-2:], mode="bilinear")[:, 0]
        return _out(soft > 0.5, was_numpy)


class AttentionOnly(_PriorThreshold):
    """Threshold the cross-attention prior a (no propagation, no "what" branch)."""


class AttentionAffinity(_PriorThreshold):
    """Threshold the propagated prior P (ablation of the feature-based "what" branch)."""

    use_propagation = True


class FeatureOnly(EditRIS):
    """Class-agnostic grouping: k-means of the decoder features, keep the cluster of highest a.

    Args:
        backbone: The editor.
        n_clusters: k of the k-means (scikit-learn, one k-means++ start, ``random_state=seed``).
        **kwargs: Forwarded to :class:`~edit_ris.EditRIS`.

    Raises:
        ValueError: For ``n_clusters < 1``.
    """

    def __init__(self, backbone: Any, n_clusters: int = 4, **kwargs: Any) -> None:
        super().__init__(backbone, **kwargs)
        self.n_clusters = check_int("n_clusters", n_clusters, low=1)

    def predict(self, images: Any, expressions: Sequence[str]) -> Any:
        """Cluster the features, pick the cluster whose mean attention prior is highest."""
        from sklearn.cluster import KMeans

        x, was_numpy = to_image_tensor(images, getattr(self.backbone, "size_multiple", 1))
        exprs = check_expressions(expressions, x.shape[0])
        with torch.no_grad():
            cap, spans = self.run_capture(x, exprs, self.templates[0])
            a, _ = self.spatial_prior(cap, spans)
            res_r = a.shape[-1]
            f = nnf.normalize(self._features(cap, res_r).flatten(2), dim=1)
        out = []
        for i in range(x.shape[0]):
            km = KMeans(self.n_clusters, n_init=1, random_state=self.seed)
            lab = km.fit_predict(f[i].T.cpu().numpy().astype(np.float64))
            ai = a[i].flatten().cpu().numpy()
            best = max(
                range(self.n_clusters),
                key=lambda c: ai[lab == c].mean() if (lab == c).any() else -1,
            )
            out.append(torch.from_numpy((lab == best).reshape(res_r, res_r)).float())
        m = nnf.interpolate(torch.stack(out)[:, None], size=x.shape[-2:], mode="nearest")[:, 0]
        return _out(m > 0.5, was_numpy)


class _DifferenceBase:
    def __init__(
        self,
        backbone: Any,
        template: str = "make the {ref} red",
        seed: int = 0,
        smooth: float = 1.0,
    ) -> None:
        if not isinstance(template, str) or template.count("{ref}") != 1:
            raise ValueError(f"template must contain '{{ref}}' exactly once, got {template!r}")
        smooth = check_real("smooth", smooth, low=0.0)
        self.backbone, self.template, self.smooth = backbone, template, smooth
        self.seed = check_int("seed", seed, low=0)

    def _prepare(self, images: Any, expressions: Any) -> Any:
        x, was_numpy = to_image_tensor(images, getattr(self.backbone, "size_multiple", 1))
        exprs = check_expressions(expressions, x.shape[0])
        instr = [self.template.replace("{ref}", strip_article(e)) for e in exprs]
        return x, was_numpy, instr


class NoiseDifference(_DifferenceBase):
    """DiffEdit-style: ``|eps(c_T) - eps(empty)|`` averaged over seeds at t = fraction * T.

    Costs ``2 * n_seeds`` denoiser calls per (image, expression).

    Raises:
        ValueError: For ``n_seeds < 1`` or ``fraction`` outside (0, 1].
    """

    def __init__(
        self, backbone: Any, n_seeds: int = 4, fraction: float = 0.5, **kwargs: Any
    ) -> None:
        super().__init__(backbone, **kwargs)
        self.n_seeds = check_int("n_seeds", n_seeds, low=1)
        self.fraction = check_real("fraction", fraction, 0.0, 1.0, low_open=True)

    @torch.no_grad()
    def predict(self, images: Any, expressions: Sequence[str]) -> Any:
        """Otsu mask of the averaged noise-prediction difference."""
        n_seeds = check_int("n_seeds", self.n_seeds, low=1)  # the attribute may be reset
        x, was_numpy, instr = self._prepare(images, expressions)
        t = max(0, int(round(self.fraction * self.backbone.num_train_timesteps)) - 1)  # noqa: RUF046 (numpy scalars)
        acc = torch.zeros(())
        for s in range(n_seeds):
            e_c = self.backbone.forward_capture(x, instr, t, self.seed + s, capture=None).eps
            e_0 = self.backbone.forward_capture(x, [""] * len(instr), t, self.seed + s).eps
            diff = (e_c - e_0).abs().mean(1)
            acc = acc + diff
        return _out(_otsu_masks(acc / n_seeds, x.shape[-2:], self.smooth), was_numpy)


class OneStepDifference(_DifferenceBase):
    """``|x0_hat(t0) - source|`` from the same single call as EditRIS, Otsu threshold."""

    @torch.no_grad()
    def predict(self, images: Any, expressions: Sequence[str], timestep: int | None = None) -> Any:
        """Otsu mask of the one-step edit estimate's difference to the source."""
        x, was_numpy, instr = self._prepare(images, expressions)
        t = self.backbone.earliest_timestep() if timestep is None else int(timestep)
        cap = self.backbone.forward_capture(x, instr, t, self.seed, capture=None)
        diff = (self.backbone.decode(cap.x0) - x).abs().mean(1)
        return _out(_otsu_masks(diff, x.shape[-2:], self.smooth), was_numpy)


class EditDifference(_DifferenceBase):
    """Synthesise then compare: the full N-step edit, smoothed ``|edited - source|`` > Otsu."""

    def __init__(self, backbone: Any, num_inference_steps: int = 20, **kwargs: Any) -> None:
        super().__init__(backbone, **kwargs)
        self.num_inference_steps = check_int("num_inference_steps", num_inference_steps, low=1)

    @torch.no_grad()
    def predict(self, images: Any, expressions: Sequence[str]) -> Any:
        """Otsu mask of the edited image's difference to the source."""
        x, was_numpy, instr = self._prepare(images, expressions)
        edited = self.backbone.edit(x, instr, self.num_inference_steps, self.seed)
        diff = (edited - x).abs().mean(1)
        return _out(_otsu_masks(diff, x.shape[-2:], self.smooth), was_numpy)


class LateTimestep(EditRIS):
    """EditRIS run at a later (less noisy) timestep, ``fraction * T`` (timestep ablation)."""

    def __init__(self, backbone: Any, fraction: float = 0.5, **kwargs: Any) -> None:
        if not isinstance(fraction, float) or not 0.0 < fraction <= 1.0:
            raise ValueError(f"fraction must be a float in (0, 1], got {fraction!r}")
        super().__init__(backbone, timestep=fraction, **kwargs)
        self.fraction = fraction
