import math

import pytest
import torch

import reference
from eva0.losses import entropy, scale_invariant_entropy


def test_scale_invariance():
    logits = torch.randn(6, 10, generator=torch.Generator().manual_seed(0))
    ref = scale_invariant_entropy(logits, 2.0)
    for c in (0.5, 1.0, 10.0):
        torch.testing.assert_close(scale_invariant_entropy(c * logits, 2.0), ref)
    assert not torch.allclose(entropy(10 * logits), entropy(logits))


def test_entropy_reference():
    logits = torch.tensor([[0.0, 0.0], [10.0, -10.0]], dtype=torch.float64)
    torch.testing.assert_close(entropy(logits), reference.entropy(logits))
    assert entropy(logits)[0] == pytest.approx(math.log(2))


def test_loss_errors():
    with pytest.raises(ValueError, match="2-D"):
        entropy(torch.zeros(3))
    with pytest.raises(TypeError, match=r"torch\.Tensor"):
        entropy([1.0])
    with pytest.raises(ValueError, match="tau must be > 0"):
        scale_invariant_entropy(torch.zeros(2, 3), 0.0)
