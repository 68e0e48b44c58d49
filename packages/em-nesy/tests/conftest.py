from pathlib import Path

import numpy as np
import pytest
import torch

from em_nesy import MultiDigitAddition

HERE = Path(__file__).resolve().parent


@pytest.fixture
def addition_batch():
    """Random float64 logits and consistent labels for N-digit addition."""

    def make(n_digits, batch=4, seed=0, scale=2.0):
        program = MultiDigitAddition(n_digits)
        gen = torch.Generator().manual_seed(seed)
        logits = scale * torch.randn(batch, 2 * n_digits, 10, generator=gen, dtype=torch.float64)
        digits = np.random.default_rng(seed).integers(0, 10, (batch, 2 * n_digits))
        return program, logits, torch.from_numpy(program.sum_digits(digits))

    return make
