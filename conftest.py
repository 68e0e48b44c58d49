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


# One torch thread for every test (two threads on two busy cores were far slower than one);
# torch is only touched once a test module has imported it, so the core stays torch-free.
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


# Docstring examples under every src/ run as doctests in the same pytest process (issue 50);
# an example that needs a large model carries `# doctest: +SKIP` and says why beside it.
def pytest_collect_file(file_path: Path, parent: object) -> object:
    """Collect the docstring examples of library modules (``shared/src``, ``packages/*/src``)."""
    if file_path.suffix != ".py" or "src" not in file_path.parts:
        return None
    from _pytest.doctest import DoctestModule

    return DoctestModule.from_parent(parent, path=file_path)
