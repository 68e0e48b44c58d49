"""EasyTag: counterfactual prototype reasoning over patch tokens."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn import functional as nnf

from easylens._validation import check_finite, check_nonneg, check_positive_int

Verifier = Callable[[int, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class TagResult:
    """What EasyTag found, per image and grid position.

    Attributes:
        margin: ``c_i = e_L(i) - e_N(i)``, ``[B, H, W]``.
        score: calibrated ``u_i = (c_i - mu) / sigma`` (``c_i`` in raw mode), ``[B, H, W]``.
        selected: the tagged patches ``S``, ``[B, H, W]`` bool.
        lesion_evidence: ``e_L(i) = max_k cos(z_i, p_k)``, ``[B, H, W]``.
        normal_evidence: ``e_N(i) = max_{m in A(i)} cos(z_i, n_m)``, ``[B, H, W]``.
        counterfactual_index: index of ``n*(i)`` in the bank's normal table, ``[B, N]``.
        prototype_index: index of ``p_k*(i)``, ``[B, N]``.
    """

    margin: torch.Tensor
    score: torch.Tensor
    selected: torch.Tensor
    lesion_evidence: torch.Tensor
    normal_evidence: torch.Tensor
    counterfactual_index: torch.Tensor
    prototype_index: torch.Tensor


def evidence(features: torch.Tensor, bank: Any) -> tuple[torch.Tensor, ...]:
    """``(e_L, k*, e_N, m*, group)`` for patch features ``[B, N, d']`` against ``bank``.

    ``group`` is the calibration cell: the grid position (``position``) or the nearest
    centroid (``cluster``).
    """
    z = nnf.normalize(features.to(bank.lesion_protos.dtype), dim=-1)
    e_l, k_star = (z @ bank.lesion_protos.T).max(dim=-1)
    e_n, m_star = bank.counterfactual(z)
    if bank.reference == "position":
        group = torch.arange(z.shape[1], device=z.device).expand(z.shape[0], -1)
    else:
        group = m_star
    return e_l, k_star, e_n, m_star, group


class EasyTag:
    """Counterfactual prototype reasoning (EasyTag; inferred from the paper's abstract).

    For each patch token ``z_i`` (L2-normalised):

    * factual lesion evidence ``e_L(i) = max_k cos(z_i, p_k)``;
    * counterfactual normal evidence ``e_N(i) = max_{m in A(i)} cos(z_i, n_m)``, argmax
      ``n*(i)`` - what the patch should look like if the tissue there were normal;
    * margin ``c_i = e_L(i) - e_N(i)``, calibrated ``u_i = (c_i - mu) / sigma``;
    * ``S = {i : u_i > threshold}`` (raw mode: ``c_i > 0``), capped at the ``k_max`` highest.

    With ``verify=True`` the top ``max_verify`` candidates are kept only if replacing ``z_i``
    by ``||z_i|| n*(i)`` and resuming the encoder lowers the zero-shot lesion score.

    Args:
        threshold: ``tau`` on the calibrated score (>= 0).
        calibrated: Use ``u_i`` (True) or the raw margin ``c_i > 0`` (False).
        k_max: At most this many patches per image (None: no cap).
        verify: Keep only candidates whose counterfactual replacement lowers ``s(I)``.
        max_verify: ``M``, candidates verified per image.

    References:
        EasyLens: A Training-Free Plug-and-Play Subtle-Lesion Representation Amplifier for
        Medical Vision-Language Models (arXiv 2606.06379).

    Example:
        >>> tag = EasyTag(threshold=3.0, k_max=3)
        >>> tag.k_max
        3
    """

    def __init__(
        self,
        threshold: float = 3.0,
        calibrated: bool = True,
        k_max: int | None = 3,
        verify: bool = False,
        max_verify: int = 16,
    ) -> None:
        self.threshold = check_nonneg(threshold, "threshold")
        self.calibrated = bool(calibrated)
        self.k_max = None if k_max is None else check_positive_int(k_max, "k_max")
        self.verify = bool(verify)
        self.max_verify = check_positive_int(max_verify, "max_verify")
        if self.max_verify > 16:
            raise ValueError(f"max_verify must be <= 16, got {max_verify}")

    def __call__(
        self,
        tokens: torch.Tensor,
        bank: Any,
        *,
        features: torch.Tensor | None = None,
        verifier: Verifier | None = None,
    ) -> TagResult:
        """Tag the patch tokens of ``tokens`` (``[B, P + N, d]`` or ``[B, N, d]``).

        Args:
            tokens: Tokens at the bank's layer, token space.
            bank: An :class:`~easylens.EasyBank`.
            features: Patch features in the bank's feature space (needed for a joint-space
                bank: ``adapter.to_joint(patches)``); default the patch tokens.
            verifier: ``(image, positions [M], counterfactual indices [M]) -> Delta [M]``
                (needed by ``verify``).
        """
        patches = bank.patch_tokens(tokens)
        check_finite(patches, "tokens")
        if features is None:
            if bank.feature_space != "token":
                raise ValueError("a joint-space bank needs features=adapter.to_joint(patches)")
            features = patches
        b = patches.shape[0]
        h, w = bank.grid_size
        e_l, k_star, e_n, m_star, group = evidence(features, bank)
        margin = e_l - e_n
        if self.calibrated:
            score = (margin - bank.margin_mu[group]) / bank.margin_sigma[group]
            cand = score > self.threshold
        else:
            score = margin
            cand = margin > 0
        if self.verify:
            if verifier is None:
                raise ValueError("verify=True needs a verifier (EasyLens builds it from prompts)")
            cand = self._verify(cand, score, m_star, verifier)
        selected = cap_top_k(cand, score, self.k_max)
        return TagResult(
            margin=margin.reshape(b, h, w),
            score=score.reshape(b, h, w),
            selected=selected.reshape(b, h, w),
            lesion_evidence=e_l.reshape(b, h, w),
            normal_evidence=e_n.reshape(b, h, w),
            counterfactual_index=m_star,
            prototype_index=k_star,
        )

    def _verify(
        self, cand: torch.Tensor, score: torch.Tensor, m_star: torch.Tensor, verifier: Verifier
    ) -> torch.Tensor:
        top = cap_top_k(cand, score, self.max_verify)
        keep = torch.zeros_like(cand)
        for i in range(cand.shape[0]):
            pos = top[i].nonzero().flatten()
            if pos.numel():
                keep[i, pos] = verifier(i, pos, m_star[i, pos]) > 0
        return keep


def cap_top_k(mask: torch.Tensor, score: torch.Tensor, k: int | None) -> torch.Tensor:
    """Keep at most ``k`` True entries per row of ``mask [B, N]``, those of highest score."""
    if k is None or k >= mask.shape[1]:
        return mask.clone()
    masked = score.masked_fill(~mask, float("-inf"))
    idx = masked.topk(k, dim=1).indices
    out = torch.zeros_like(mask)
    out.scatter_(1, idx, True)
    return out & mask
