"""eva-cap test fixtures: a small world and a tiny captioner."""

import pytest
import torch

from eva_cap.synthetic import AVWorld, TinyAVCaptioner, collate


@pytest.fixture
def clips():
    return AVWorld(0).sample(24)


@pytest.fixture
def batch(clips):
    return collate(clips)


@pytest.fixture
def tiny():
    torch.manual_seed(0)
    return TinyAVCaptioner(d=32, nhead=2, n_enc=1, n_dec=1)
