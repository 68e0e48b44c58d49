"""Small digit classifiers for 8x8 images; they map ``(..., 8, 8)`` to logits ``(..., 10)``."""

from __future__ import annotations

import torch
from torch import nn


class DigitMLP(nn.Module):
    """64-hidden-10 MLP with ReLU, applied to every image of a ``(..., 8, 8)`` batch.

    Args:
        hidden: Hidden width.
        n_classes: Number of symbol values.

    Example:
        >>> DigitMLP()(torch.zeros(3, 4, 8, 8)).shape
        torch.Size([3, 4, 10])
    """

    def __init__(self, hidden: int = 128, n_classes: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits for each image; ``x`` ends in ``(8, 8)`` or ``(64,)``."""
        if x.shape[-2:] == (8, 8):
            x = x.flatten(-2)
        if x.shape[-1] != 64:
            raise ValueError(f"images must end in (8, 8) or (64,), got {tuple(x.shape)}")
        return self.net(x)


class DigitCNN(nn.Module):
    """Two 3x3 conv layers and a linear head for 8x8 images.

    Args:
        channels: Channels of the conv layers.
        n_classes: Number of symbol values.

    Example:
        >>> DigitCNN()(torch.zeros(3, 4, 8, 8)).shape
        torch.Size([3, 4, 10])
    """

    def __init__(self, channels: int = 16, n_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(channels, channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )  # fmt: skip
        self.head = nn.Linear(channels * 4, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits for each image of ``x`` (``(..., 8, 8)``)."""
        if x.shape[-2:] != (8, 8):
            raise ValueError(f"images must end in (8, 8), got {tuple(x.shape)}")
        lead = x.shape[:-2]
        h = self.features(x.reshape(-1, 1, 8, 8)).flatten(1)
        return self.head(h).reshape(*lead, -1)
