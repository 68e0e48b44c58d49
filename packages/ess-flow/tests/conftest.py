"""ess-flow test set-up: one torch thread, and the references of ``reference.py``.

``reference.py`` is loaded under the unique name ``ess_flow_reference`` (not ``reference``),
so that it cannot clash with another package's ``tests/reference.py`` in one pytest run.
"""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch


def _load_reference() -> None:
    spec = importlib.util.spec_from_file_location(
        "ess_flow_reference", Path(__file__).with_name("reference.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)


_load_reference()


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
