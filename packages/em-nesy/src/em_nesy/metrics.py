"""Evaluation metrics for multi-digit addition."""

from __future__ import annotations

import numpy as np
import torch

from em_nesy.programs import MultiDigitAddition


def digit_accuracy(pred_digits: torch.Tensor, true_digits: torch.Tensor) -> float:
    """Fraction of images whose digit is predicted correctly.

    Raises:
        ValueError: If shapes differ.
    """
    if pred_digits.shape != true_digits.shape:
        raise ValueError(f"shapes differ: {tuple(pred_digits.shape)} vs {tuple(true_digits.shape)}")
    return float((pred_digits == true_digits).float().mean())


def sum_accuracy(pred_digits: torch.Tensor, sums: torch.Tensor, n_digits: int) -> float:
    """Fraction of examples whose predicted digits (added) give the labelled sum.

    Args:
        pred_digits: ``(E, 2N)`` per-image argmax predictions.
        sums: ``(E, N + 1)`` label digits, most significant first.
        n_digits: ``N``.
    """
    pred_sums = MultiDigitAddition(n_digits).sum_digits(pred_digits.cpu().numpy())
    return float(np.mean(np.all(pred_sums == sums.cpu().numpy(), axis=1)))
