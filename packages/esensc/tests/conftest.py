"""esensc test set-up: the float64 / brute-force references of ``reference.py``.

``reference.py`` is loaded under the unique name ``esensc_reference`` (not ``reference``), so
that it cannot clash with another package's ``tests/reference.py`` in one pytest run.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest


def _load_reference() -> None:
    spec = importlib.util.spec_from_file_location(
        "esensc_reference", Path(__file__).with_name("reference.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)


_load_reference()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
