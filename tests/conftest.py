"""Cross-package test set-up: every test taking a ``package`` argument runs once per package.

With no package under ``packages/`` those tests are collected with an empty parameter set
(reported as skipped); they bite as soon as a package folder exists.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Package:
    """A package folder and the names derived from it."""

    dir: Path
    dist: str
    import_name: str

    def __str__(self) -> str:
        return self.dist


def discover_packages() -> list[Package]:
    pkgs = []
    for path in sorted((ROOT / "packages").glob("*/pyproject.toml")):
        dist = tomllib.loads(path.read_text())["project"]["name"]
        pkgs.append(Package(path.parent, dist, dist.replace("-", "_")))
    return pkgs


def pytest_generate_tests(metafunc):
    if "package" in metafunc.fixturenames:
        pkgs = discover_packages()
        metafunc.parametrize("package", pkgs, ids=[p.dist for p in pkgs])


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def all_import_names() -> set[str]:
    return {p.import_name for p in discover_packages()}


@pytest.fixture
def probe(tmp_path):
    """A fresh package made by scripts/new_package.py in a scratch tree (for breaking it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "new_package", ROOT / "scripts" / "new_package.py"
    )
    new_package = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(new_package)
    (tmp_path / "README.md").write_text("| [`packages/a`](packages/a) (`a`) | a |\n")
    pkg_dir = new_package.create("probe-pkg", root=tmp_path)
    return Package(pkg_dir, "probe-pkg", "probe_pkg")


def _load_quick_benchmarks():
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(
        "quick_benchmarks", Path(__file__).with_name("quick_benchmarks.py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_quick = _load_quick_benchmarks()
QUICK_TEST = "test_quick_benchmark_writes_valid_records"


def pytest_collection_finish(session):
    """Start the selected packages' quick benchmarks in the background (tests/quick_benchmarks)."""
    if session.config.option.collectonly:
        return
    packages = [
        item.callspec.params["package"]
        for item in session.items
        if getattr(item, "originalname", None) == QUICK_TEST
    ]
    _quick.QUICK_BENCHMARKS.start([(p.dist, p.dir) for p in packages])


def pytest_terminal_summary(terminalreporter):
    runs = _quick.QUICK_BENCHMARKS.finished()
    if runs:
        terminalreporter.section("quick benchmarks (background, wall time each)")
        for run in runs:
            terminalreporter.write_line(f"{run.wall_s:7.1f}s  {run.dist}  exit {run.returncode}")


def pytest_unconfigure(config):
    _quick.QUICK_BENCHMARKS.close()


@pytest.fixture
def quick_benchmark_run(package, tmp_path):
    """The package's ``bench/run.py --quick`` run (started at collection, or now if it was not)."""
    return _quick.QUICK_BENCHMARKS.result(package.dist, package.dir, tmp_path / "results")
