"""EasyAmplifier: morphology-guided residual enhancement of the tagged patch tokens."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from scipy import ndimage

from easylens._validation import check_choice, check_nonneg
from easylens.tag import TagResult

EIGHT = np.ones((3, 3), dtype=bool)  # 8-connectivity


def morphology_weights(
    selected: np.ndarray, ring_weight: float, kappa: float, max_gain: float, max_area: float
) -> tuple[np.ndarray, np.ndarray]:
    """Weights ``w`` and gains ``gamma`` on one ``[H, W]`` selection grid.

    Components (8-connected) larger than ``max_area * H * W`` are dropped; ``w = 1`` on the
    kept components, ``ring_weight`` on their one-patch dilation ring, 0 elsewhere;
    ``gamma_C = min(max_gain, 1 + kappa / area_C)``, a ring patch taking the largest gain of
    the components it touches.
    """
    sel = np.asarray(selected, dtype=bool)
    labels, n = ndimage.label(sel, structure=EIGHT)
    w = np.zeros(sel.shape)
    gain = np.zeros(sel.shape)
    if n == 0:
        return w, gain
    areas = np.bincount(labels.ravel(), minlength=n + 1)[1:].astype(float)
    keep = areas <= max_area * sel.size
    comp_gain = np.minimum(max_gain, 1.0 + kappa / areas) * keep
    core = keep[labels - 1] & (labels > 0)
    core_gain = np.where(core, comp_gain[labels - 1], 0.0)
    ring = ndimage.binary_dilation(core, structure=EIGHT) & ~core
    ring_gain = ndimage.grey_dilation(core_gain, footprint=EIGHT, mode="constant", cval=0.0)
    w[core] = 1.0
    w[ring] = ring_weight
    gain[core] = core_gain[core]
    gain[ring] = ring_gain[ring]
    return w, gain


class EasyAmplifier:
    """Morphology-guided residual enhancement (EasyAmplifier; inferred from the abstract).

    On the ``H x W`` grid of the tagged set ``S``:

    1. 8-connected components; drop those with area > ``max_area * N``;
    2. ``w_i = 1`` on S, ``ring_weight`` on its one-patch dilation ring, 0 elsewhere;
    3. ``gamma_C = min(max_gain, 1 + kappa / area_C)``;
    4. ``r_i = z_i - ||z_i|| n*(i)`` (``residual="normal"``) or
       ``r_i = ||z_i|| (p_k*(i) - n*(i))`` (``"prototype"``);
    5. ``z_i' = z_i + alpha w_i gamma_C(i) r_i``, then ``||z_i'|| <= max_norm_ratio ||z_i||``.

    Prefix tokens are never changed; no parameter is touched.

    Args:
        alpha: Strength (>= 0; 0 is the identity).
        ring_weight: ``beta``, weight of the dilation ring.
        kappa: Size-adaptive gain numerator.
        max_gain: ``gamma_max``.
        max_area: Largest kept component as a share of the N patches.
        residual: ``"normal"`` or ``"prototype"``.
        max_norm_ratio: ``nu``.

    References:
        EasyLens (arXiv 2606.06379).

    Example:
        >>> EasyAmplifier(alpha=1.0).kappa
        2.0
    """

    def __init__(
        self,
        alpha: float = 1.0,
        ring_weight: float = 0.5,
        kappa: float = 2.0,
        max_gain: float = 3.0,
        max_area: float = 0.25,
        residual: str = "normal",
        max_norm_ratio: float = 3.0,
    ) -> None:
        self.alpha = check_nonneg(alpha, "alpha")
        self.ring_weight = check_nonneg(ring_weight, "ring_weight")
        self.kappa = check_nonneg(kappa, "kappa")
        self.max_gain = check_nonneg(max_gain, "max_gain")
        if self.max_gain < 1:
            raise ValueError(f"max_gain must be >= 1, got {max_gain}")
        self.max_area = check_nonneg(max_area, "max_area")
        if not 0 < self.max_area <= 1:
            raise ValueError(f"max_area must be in (0, 1], got {max_area}")
        self.residual = check_choice(residual, "residual", ("normal", "prototype"))
        self.max_norm_ratio = check_nonneg(max_norm_ratio, "max_norm_ratio")
        if self.max_norm_ratio < 1:
            raise ValueError(f"max_norm_ratio must be >= 1, got {max_norm_ratio}")

    def weights(self, selected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(w, gamma)``, each ``[B, H, W]``, for a selection ``[B, H, W]``."""
        sel = selected.detach().cpu().numpy().astype(bool)
        pairs = [
            morphology_weights(s, self.ring_weight, self.kappa, self.max_gain, self.max_area)
            for s in sel
        ]
        w = torch.as_tensor(np.stack([p[0] for p in pairs]), device=selected.device)
        g = torch.as_tensor(np.stack([p[1] for p in pairs]), device=selected.device)
        return w, g

    def amplify(
        self,
        tokens: torch.Tensor,
        coef: torch.Tensor,
        counterfactual: torch.Tensor,
        prototype: torch.Tensor | None = None,
        num_prefix_tokens: int = 0,
    ) -> torch.Tensor:
        """``z' = z + alpha * coef * r`` on the patch tokens, with the norm clip.

        Args:
            tokens: ``[B, P + N, d]``.
            coef: ``w * gamma``, ``[B, N]`` (or ``[B, H, W]``).
            counterfactual: unit ``n*(i)`` in token space, ``[B, N, d]``.
            prototype: unit ``p_k*(i)`` in token space, ``[B, N, d]`` (``"prototype"``).
            num_prefix_tokens: ``P``; prefix tokens are returned unchanged.
        """
        p = num_prefix_tokens
        z = tokens[:, p:]
        coef = coef.reshape(z.shape[0], -1).to(z.dtype)
        if self.alpha == 0 or not bool((coef != 0).any()):
            return tokens
        norm = z.norm(dim=-1, keepdim=True)
        n_star = counterfactual.to(z.dtype)
        if self.residual == "normal":
            r = z - norm * n_star
        else:
            if prototype is None:
                raise ValueError("residual='prototype' needs token-space lesion prototypes")
            r = norm * (prototype.to(z.dtype) - n_star)
        z_new = z + self.alpha * coef.unsqueeze(-1) * r
        new_norm = z_new.norm(dim=-1, keepdim=True)
        cap = self.max_norm_ratio * norm
        z_new = torch.where(new_norm > cap, z_new * cap / new_norm.clamp_min(1e-12), z_new)
        z_new = torch.where(coef.unsqueeze(-1) != 0, z_new, z)  # untouched patches stay exact
        return torch.cat([tokens[:, :p], z_new], dim=1)

    def __call__(
        self, tokens: torch.Tensor, tag: TagResult, bank: Any, layer: int | None = None
    ) -> torch.Tensor:
        """Amplify the patches ``tag`` selected, with residuals from ``bank`` at ``layer``."""
        w, g = self.weights(tag.selected)
        cf, proto = bank.residual_targets(tag, layer)
        return self.amplify(tokens, w * g, cf, proto, bank.num_prefix_tokens)
