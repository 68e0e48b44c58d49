"""hel test set-up: one thread, and ``tests/reference.py`` importable as ``hel_reference``.

The reference module is registered under a package-specific name so that it never collides
with another package's ``tests/reference.py`` when several suites run in one session.
"""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch


def _load_reference():
    spec = importlib.util.spec_from_file_location(
        "hel_reference", Path(__file__).with_name("reference.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)


_load_reference()


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
