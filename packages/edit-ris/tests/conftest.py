"""edit-ris test set-up: a random-init TinyEditor (never trained in tests)."""

import pytest
import torch

from edit_ris import TinyEditor
from edit_ris.data.shapes import vocabulary


@pytest.fixture(scope="session")
def tiny():
    state = torch.random.get_rng_state()
    torch.manual_seed(0)
    model = TinyEditor(vocabulary()).eval()
    torch.random.set_rng_state(state)
    return model
