"""Multi-digit addition built from scikit-learn's bundled 8x8 digits (offline)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import NDArray

from em_nesy.programs import MultiDigitAddition


def load_digit_images(
    n_test: int = 597, random_state: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stratified train/test split of the 1797 digits, images ``(n, 8, 8)`` in [0, 1].

    Args:
        n_test: Approximate number of test images (per-class rounding may move it by a few).
        random_state: Seed of the split.

    Returns:
        ``(train_images, train_labels, test_images, test_labels)`` as float32 / int64 tensors.

    Raises:
        ValueError: If ``n_test`` is not in (0, 1797).
    """
    from methodkit.data import split_digits

    if not 0 < n_test < 1797:
        raise ValueError(f"n_test must be in (0, 1797), got {n_test}")
    X_tr, X_te, y_tr, y_te = split_digits(n_test / 1797, random_state=random_state)
    return (
        torch.from_numpy(X_tr.reshape(-1, 8, 8)).float(),
        torch.from_numpy(y_tr),
        torch.from_numpy(X_te.reshape(-1, 8, 8)).float(),
        torch.from_numpy(y_te),
    )


@dataclass
class AdditionDataset(torch.utils.data.Dataset):
    """Examples of N-digit addition.

    Attributes:
        images: ``(E, 2N, 8, 8)`` in the program's variable order ``a_0..a_{N-1}, b_0..b_{N-1}``.
        sums: ``(E, N + 1)`` digits of ``a + b``, most significant first (the label).
        digits: ``(E, 2N)`` hidden true digits (for evaluation only).
    """

    images: torch.Tensor
    sums: torch.Tensor
    digits: torch.Tensor

    def __len__(self) -> int:
        """Number of examples."""
        return int(self.images.shape[0])

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(images, sums)`` of example ``i``."""
        return self.images[i], self.sums[i]


def make_addition_dataset(
    images: torch.Tensor | NDArray[np.floating],
    labels: torch.Tensor | NDArray[np.integer],
    n_digits: int,
    n_examples: int,
    seed: int | np.random.Generator | None = None,
) -> AdditionDataset:
    """Sample ``n_examples`` additions of two ``n_digits``-digit numbers from labelled images.

    Each digit position draws an image uniformly (with replacement) from ``images``.

    Args:
        images: ``(M, 8, 8)`` (or ``(M, ...)``) digit images.
        labels: ``(M,)`` their digits 0..9.
        n_digits: Digits per operand (>= 1).
        n_examples: Number of examples (>= 1).
        seed: Seed or generator (deterministic for a given seed).

    Returns:
        The dataset.

    Raises:
        ValueError: On bad sizes or labels outside 0..9.
    """
    program = MultiDigitAddition(n_digits)
    if n_examples < 1:
        raise ValueError(f"n_examples must be >= 1, got {n_examples}")
    images = torch.as_tensor(images)
    labels_np = np.asarray(labels.cpu() if isinstance(labels, torch.Tensor) else labels)
    if images.shape[0] != labels_np.shape[0] or labels_np.ndim != 1:
        raise ValueError(f"images {tuple(images.shape)} and labels {labels_np.shape} disagree")
    if labels_np.min() < 0 or labels_np.max() > 9:
        raise ValueError("labels must be digits 0..9")
    gen = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    idx = gen.integers(0, images.shape[0], size=(n_examples, 2 * n_digits))
    digits = labels_np[idx].astype(np.int64)
    sums = program.sum_digits(digits)
    return AdditionDataset(
        images=images[torch.from_numpy(idx)],
        sums=torch.from_numpy(sums),
        digits=torch.from_numpy(digits),
    )
