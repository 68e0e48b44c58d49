"""Constant tables of the addition program, shared by the program and its exact engine."""

from __future__ import annotations

import torch


def addition_indicator() -> torch.Tensor:
    """Indicator tensor ``I[s, c, c', a, b] = [a + b + c == s + 10 c']`` (float64)."""
    s = torch.arange(10).view(10, 1, 1, 1, 1)
    c = torch.arange(2).view(1, 2, 1, 1, 1)
    c2 = torch.arange(2).view(1, 1, 2, 1, 1)
    a = torch.arange(10).view(1, 1, 1, 10, 1)
    b = torch.arange(10).view(1, 1, 1, 1, 10)
    return (a + b + c == s + 10 * c2).to(torch.float64)
