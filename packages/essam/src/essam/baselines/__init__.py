"""Baselines: ``MinimalGRPO`` (pure torch) and a lazy adapter around ``trl.GRPOTrainer``."""

from essam.baselines.grpo import MinimalGRPO

__all__ = ["MinimalGRPO"]
