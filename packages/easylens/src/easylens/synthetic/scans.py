"""Procedural "chest scans" with planted lesions: a SYNTHETIC stand-in, not medical data.

Rendered at 64 x 64 then 2 x 2 average-pooled to 32 x 32 grayscale: a body ellipse with
smoothed-noise texture, two darker lungs, a bright spine band, faint vessel lines, global
jitter (shift ~1.5 px, scale +-7 %) and pixel noise. Lesions sit inside one lung with one of
four morphologies (round nodule, irregular blob, elongated streak, ring/cavity).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy import ndimage

MORPHOLOGIES = ("round", "irregular", "streak", "ring")
SIDES = ("left", "right")
# radius (px at 64) and contrast ranges per regime. "subtle" is recalibrated below the spec's
# contrast 0.16-0.24 (kept as "subtle_spec"): a TinyCLIP trained for the spec's 4,000 steps
# detects those at AUROC 0.91-0.93, above the calibration band's 0.90. The rule, fixed before
# probing: the highest-contrast range whose Vanilla AUROC on that model is <= 0.80 (probe on
# seed 0: 0.13-0.20 -> 0.872, 0.12-0.18 -> 0.838, 0.10-0.16 -> 0.778). "faint" is the extra,
# harder split.
REGIMES = {
    "obvious": ((3.0, 6.0), (0.18, 0.35)),
    "subtle": ((1.6, 2.4), (0.10, 0.16)),
    "subtle_spec": ((1.6, 2.4), (0.16, 0.24)),
    "faint": ((1.6, 2.4), (0.07, 0.12)),
}
LUNG_CENTRE = (0.40, -0.05)  # (|x|, y) in body units
LUNG_RADII = (0.26, 0.58)


@dataclass
class ScanBatch:
    """A batch of synthetic scans.

    Attributes:
        images: ``[n, 1, S, S]`` float32 in [0, 1] (S = size / 2).
        labels: ``[n]`` int, 1 = lesion.
        morphology: Lesion morphology per image (None for normal images).
        side: ``"left"``/``"right"`` lung (None for normal images).
        pixel_mask: ``[n, S, S]`` bool lesion pixels.
        lung_mask: ``[n, S, S]`` bool lung pixels.
    """

    images: torch.Tensor
    labels: np.ndarray
    morphology: list[str | None]
    side: list[str | None]
    pixel_mask: torch.Tensor
    lung_mask: torch.Tensor

    def patch_mask(self, patch: int = 4) -> torch.Tensor:
        """``[n, S/patch, S/patch]`` bool: a patch is a lesion patch if any pixel is."""
        n, s, _ = self.pixel_mask.shape
        if s % patch:
            raise ValueError(f"patch={patch} does not divide the image size {s}")
        g = s // patch
        return self.pixel_mask.reshape(n, g, patch, g, patch).any(dim=4).any(dim=2)


def reports(batch: ScanBatch) -> list[str]:
    """Templated reports: "chest scan with a ring lesion in the left lung" / normal."""
    return [
        report(m, s) if lab else report(None, None)
        for lab, m, s in zip(batch.labels, batch.morphology, batch.side, strict=True)
    ]


def report(morphology: str | None, side: str | None) -> str:
    """One report sentence."""
    if morphology is None:
        return "normal chest scan with no lesion"
    return f"chest scan with a {morphology} lesion in the {side} lung"


class ScanGenerator:
    """Seeded generator of synthetic scans (a stand-in for chest X-rays).

    Args:
        size: Render size in pixels (images are returned at ``size // 2``).
        seed: Seed of the generator's own ``numpy`` stream.
    """

    def __init__(self, size: int = 64, seed: int = 0) -> None:
        if size < 16 or size % 2:
            raise ValueError(f"size must be an even integer >= 16, got {size}")
        self.size = size
        self.rng = np.random.default_rng(seed)
        y, x = np.mgrid[0:size, 0:size].astype(np.float64)
        self._px, self._py = x, y

    def sample(self, n: int, regime: str = "normal") -> ScanBatch:
        """``n`` scans: all normal (``"normal"``) or all with a lesion (subtle/obvious/faint)."""
        if regime != "normal" and regime not in REGIMES:
            raise ValueError(f"regime must be 'normal' or one of {tuple(REGIMES)}, got {regime!r}")
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        imgs, masks, lungs, morphs, sides = [], [], [], [], []
        for _ in range(n):
            img, mask, lung, m, s = self._one(regime)
            imgs.append(img)
            masks.append(mask)
            lungs.append(lung)
            morphs.append(m)
            sides.append(s)
        return ScanBatch(
            images=torch.as_tensor(np.stack(imgs)[:, None], dtype=torch.float32),
            labels=np.full(n, int(regime != "normal")),
            morphology=morphs,
            side=sides,
            pixel_mask=torch.as_tensor(np.stack(masks)),
            lung_mask=torch.as_tensor(np.stack(lungs)),
        )

    def _one(self, regime: str) -> tuple:
        rng, s = self.rng, self.size
        half = s / 2
        scale = rng.uniform(0.93, 1.07)
        cx, cy = half - 0.5 + rng.normal(0, 1.5), half - 0.5 + rng.normal(0, 1.5)
        X, Y = (self._px - cx) / (half * scale), (self._py - cy) / (half * scale)
        body = _soft(1 - np.hypot(X / 0.88, Y / 0.94), 25)
        img = 0.08 + 0.45 * body
        tex = ndimage.gaussian_filter(rng.standard_normal((s, s)), 2.5)
        img += 0.04 * body * tex / (tex.std() + 1e-9)
        lung_r = []
        for sgn in (-1, 1):
            r = np.hypot(
                (X - sgn * LUNG_CENTRE[0]) / LUNG_RADII[0], (Y - LUNG_CENTRE[1]) / LUNG_RADII[1]
            )
            lung_r.append(r)
            img -= 0.25 * _soft(1 - r, 15)
        img += 0.3 * body * _soft(0.07 - np.abs(X), 60) * _soft(0.85 - np.abs(Y), 20)  # spine
        for sgn in (-1, 1):  # faint vessels radiating from the hilum
            for _ in range(3):
                ang = rng.uniform(-1.2, 1.2) + (0 if sgn > 0 else np.pi)
                length = rng.uniform(0.25, 0.45)
                d = _segment_distance(X, Y, sgn * 0.15, -0.1, ang, length)
                img += 0.04 * _soft(0.025 - d, 120) * _soft(1 - lung_r[(sgn + 1) // 2], 15)
        lesion = np.zeros((s, s))
        morph = side = None
        if regime != "normal":
            (r_lo, r_hi), (c_lo, c_hi) = REGIMES[regime]
            morph = MORPHOLOGIES[rng.integers(4)]
            k = int(rng.integers(2))
            side = SIDES[k]  # image left = patient's right; the label is the image side
            radius = rng.uniform(r_lo, r_hi)
            lx, ly = self._lesion_centre(k, radius, half * scale, cx, cy)
            lesion = _lesion(self._px - lx, self._py - ly, radius, morph, rng)
            img += rng.uniform(c_lo, c_hi) * lesion
        img += rng.normal(0, 0.015, (s, s))
        pool = lambda a: a.reshape(s // 2, 2, s // 2, 2).mean(axis=(1, 3))  # noqa: E731
        lung = np.minimum(lung_r[0], lung_r[1]) < 1
        return (
            np.clip(pool(img), 0, 1),
            pool(lesion) > 0.25,
            pool(lung.astype(float)) > 0.5,
            morph,
            side,
        )

    def _lesion_centre(
        self, k: int, radius: float, unit: float, cx: float, cy: float
    ) -> tuple[float, float]:
        sgn = -1 if k == 0 else 1
        ax, ay = LUNG_RADII[0] * unit, LUNG_RADII[1] * unit  # lung semi-axes in px
        margin = min(0.75, (2.0 * radius + 2.0) / ax)
        while True:  # rejection sample inside the shrunken lung ellipse
            u, v = self.rng.uniform(-1, 1, 2)
            if np.hypot(u, v) <= 1 - margin:
                return cx + sgn * LUNG_CENTRE[0] * unit + u * ax, cy + LUNG_CENTRE[
                    1
                ] * unit + v * ay


def _soft(x: np.ndarray, sharpness: float) -> np.ndarray:
    return 1 / (1 + np.exp(-np.clip(sharpness * x, -50, 50)))


def _segment_distance(
    X: np.ndarray, Y: np.ndarray, x0: float, y0: float, ang: float, length: float
) -> np.ndarray:
    dx, dy = np.cos(ang), np.sin(ang)
    t = np.clip((X - x0) * dx + (Y - y0) * dy, 0, length)
    return np.hypot(X - x0 - t * dx, Y - y0 - t * dy)


def _lesion(
    dx: np.ndarray, dy: np.ndarray, r: float, morph: str, rng: np.random.Generator
) -> np.ndarray:
    d, th = np.hypot(dx, dy), np.arctan2(dy, dx)
    if morph == "round":
        return _soft(r - d, 2.0)
    if morph == "irregular":
        rr = r * (
            1
            + 0.3 * np.sin(3 * th + rng.uniform(0, 6.3))
            + 0.15 * np.sin(5 * th + rng.uniform(0, 6.3))
        )
        return _soft(rr - d, 2.0)
    if morph == "streak":
        a = rng.uniform(0, np.pi)
        u = dx * np.cos(a) + dy * np.sin(a)
        v = -dx * np.sin(a) + dy * np.cos(a)
        return _soft(1 - np.hypot(u / (1.6 * r), v / (0.55 * r)), 3.0)
    width = max(0.7, 0.35 * r)  # ring / cavity
    return _soft(width - np.abs(d - r), 2.5)
