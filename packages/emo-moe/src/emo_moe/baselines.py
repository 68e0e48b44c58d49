"""What EMO is compared with: the standard top-k MoE, random subsets, per-sequence balancing."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import torch

from emo_moe.losses import global_load_balancing_loss
from emo_moe.model import TinyMoEConfig
from emo_moe.routing import RouterOutput, TopKRouter

__all__ = ["TopKRouter", "random_expert_subsets", "sequence_load_balancing_loss", "standard_moe"]


def standard_moe(cfg: TinyMoEConfig) -> TinyMoEConfig:
    """The standard MoE of the same budget: ``cfg`` with plain top-k routers."""
    return dataclasses.replace(cfg, router="topk")


def random_expert_subsets(
    n_layers: int, num_experts: int, m: int, generator: torch.Generator | None = None
) -> list[torch.Tensor]:
    """Control for the selection method: ``m`` experts per layer uniformly at random (sorted).

    Raises:
        ValueError: If ``m`` is outside ``[1, num_experts]``.
    """
    if not 1 <= m <= num_experts:
        raise ValueError(f"m must be in [1, {num_experts}], got {m}")
    return [
        torch.sort(torch.randperm(num_experts, generator=generator)[:m]).values
        for _ in range(n_layers)
    ]


def sequence_load_balancing_loss(
    router_outputs: Sequence[RouterOutput], num_experts: int, top_k: int
) -> torch.Tensor:
    """Per-sequence balancing (ablation): one ``(E/k) sum f_e P_e`` per row, averaged."""
    return global_load_balancing_loss(router_outputs, num_experts, top_k, granularity="sequence")
