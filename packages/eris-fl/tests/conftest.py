import importlib.util
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# tests/reference.py under a name no other package's tests use: all packages share one run.
_spec = importlib.util.spec_from_file_location("eris_fl_reference", HERE / "reference.py")
_reference = importlib.util.module_from_spec(_spec)
sys.modules["eris_fl_reference"] = _reference
_spec.loader.exec_module(_reference)


@pytest.fixture(autouse=True)
def _one_thread():
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)
