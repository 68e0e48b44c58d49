import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from em_nesy import MultiDigitAddition

HERE = Path(__file__).resolve().parent

# tests/reference.py under a name no other package's tests use: all packages share one run.
_spec = importlib.util.spec_from_file_location("em_nesy_reference", HERE / "reference.py")
_reference = importlib.util.module_from_spec(_spec)
sys.modules["em_nesy_reference"] = _reference
_spec.loader.exec_module(_reference)


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
