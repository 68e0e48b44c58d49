"""Repo-wide pytest setup; runs before any test module imports numpy or torch."""

import os

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


# Each package keeps its slow, obviously correct references in tests/reference.py and its tests
# write `from reference import ...`. One pytest process collects every package, so before a
# test module is imported, `reference` is pointed at that package's own file.
import importlib.util  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

_REFERENCES: dict[Path, object] = {}


def _reference_module(path: Path) -> object:
    if path not in _REFERENCES:
        spec = importlib.util.spec_from_file_location("reference", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _REFERENCES[path] = module
    return _REFERENCES[path]


def pytest_collectstart(collector: object) -> None:
    """Point `import reference` at the tests/reference.py beside the module being collected."""
    path = getattr(collector, "path", None)
    if path is None or path.suffix != ".py":
        return
    ref = Path(path).parent / "reference.py"
    if ref.is_file() and Path(path) != ref:
        sys.modules["reference"] = _reference_module(ref)
