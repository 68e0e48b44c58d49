"""One layout inside every package (CONTRIBUTING.md, "Package layout").

The method in ``src/<import>/<name>.py`` or ``_<name>.py`` (``<name>``: the import name or its
first word), baselines in ``baselines.py`` or ``baselines/``, test references in
``tests/reference.py``, bench code only under ``bench/`` as a thin script over ``run_suite``,
no ``src`` module over 600 lines, no private name imported across modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

MAX_SRC_LINES = 600
MAX_RUN_LINES = 300
MAX_MAIN_LINES = 30
# What run_suite owns: a bench script that spells these out repeats the core's plumbing.
BOILERPLATE = ("BenchRecord(", "save_record(", "finish(", "bench_parser(", "set_threads(")


def method_module_names(import_name: str) -> set[str]:
    names = {import_name, import_name.split("_")[0]}
    return {f"{p}{n}.py" for n in names for p in ("", "_")}


def layout_problems(pkg_dir: Path, import_name: str) -> list[str]:
    """Every way the package at ``pkg_dir`` departs from the layout (empty: none)."""
    src = pkg_dir / "src" / import_name
    problems = []
    wanted = method_module_names(import_name)
    if not any((src / name).is_file() for name in wanted):
        problems.append(f"no method module: one of {sorted(wanted)} in {src}")
    if not ((src / "baselines.py").is_file() or (src / "baselines").is_dir()):
        problems.append(f"no baselines.py or baselines/ in {src}")
    if not (pkg_dir / "tests" / "reference.py").is_file():
        problems.append("no tests/reference.py")
    for path in sorted(src.rglob("*.py")):
        n = len(path.read_text().splitlines())
        if n > MAX_SRC_LINES:
            problems.append(f"{path.relative_to(pkg_dir)} has {n} lines (> {MAX_SRC_LINES})")
        stem = path.stem.lstrip("_")
        if stem.startswith("bench") or "methodkit.bench" in path.read_text():
            problems.append(f"{path.relative_to(pkg_dir)}: benchmark code belongs in bench/")
    problems += bench_problems(pkg_dir)
    for folder in ("src", "tests", "bench"):
        for path in sorted((pkg_dir / folder).rglob("*.py")):
            problems += private_imports(path, pkg_dir / "src", import_name)
    return problems


def bench_problems(pkg_dir: Path) -> list[str]:
    run = pkg_dir / "bench" / "run.py"
    if not run.is_file():
        return ["no bench/run.py"]
    problems = []
    text = run.read_text()
    if len(text.splitlines()) > MAX_RUN_LINES:
        problems.append(f"bench/run.py has {len(text.splitlines())} lines (> {MAX_RUN_LINES})")
    mains = [
        node
        for node in ast.parse(text).body
        if isinstance(node, ast.FunctionDef) and node.name == "main"
    ]
    if not mains:
        problems.append("bench/run.py has no main()")
    for node in mains:
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length > MAX_MAIN_LINES:
            problems.append(f"bench/run.py main() has {length} lines (> {MAX_MAIN_LINES})")
    if "run_suite(" not in text:
        problems.append("bench/run.py does not go through methodkit.bench.run_suite")
    for path in sorted((pkg_dir / "bench").glob("*.py")):
        body = path.read_text()
        problems += [f"{path.name} repeats {b!r}" for b in BOILERPLATE if b in body]
    return problems


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


CORE_SRC = Path(__file__).resolve().parent.parent / "shared" / "src"


def private_imports(path: Path, src_root: Path, import_name: str) -> list[str]:
    """Private names imported from first-party modules (private modules themselves are fine)."""
    roots = {import_name: src_root, "methodkit": CORE_SRC}
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
            continue
        top = node.module.split(".")[0]
        if top not in roots:
            continue
        module_dir = roots[top].joinpath(*node.module.split("."))
        for alias in node.names:
            is_module = (module_dir / f"{alias.name}.py").is_file() or (
                module_dir / alias.name
            ).is_dir()
            if _is_private(alias.name) and not is_module:
                found.append(
                    f"{path.name}:{node.lineno} imports private {node.module}.{alias.name}"
                )
    return found


def test_package_layout(package):
    assert layout_problems(package.dir, package.import_name) == []


def test_core_imports_no_private_name(repo_root):
    src = repo_root / "shared" / "src"
    problems = []
    for path in sorted(src.rglob("*.py")):
        problems += private_imports(path, src, "methodkit")
        n = len(path.read_text().splitlines())
        if n > MAX_SRC_LINES:
            problems.append(f"{path} has {n} lines")
    assert problems == []


def test_a_new_package_passes_and_each_break_is_caught(probe):
    src = probe.dir / "src" / probe.import_name
    assert layout_problems(probe.dir, probe.import_name) == []
    breaks = [
        (lambda: (probe.dir / "tests" / "reference.py").unlink(), "no tests/reference.py"),
        (lambda: (src / "baselines.py").unlink(), "no baselines.py"),
        (lambda: (src / "_probe_pkg.py").rename(src / "core.py"), "no method module"),
        (lambda: (src / "big.py").write_text("x = 1\n" * 601), "601 lines"),
        (
            lambda: (src / "extra.py").write_text("from probe_pkg._probe_pkg import _hidden\n"),
            "imports private probe_pkg._probe_pkg._hidden",
        ),
        (
            lambda: (probe.dir / "bench" / "run.py").write_text(
                (probe.dir / "bench" / "run.py").read_text() + "\n# BenchRecord(\n"
            ),
            "repeats 'BenchRecord('",
        ),
        (
            lambda: (src / "benchmark.py").write_text('"""A harness."""\n'),
            "benchmark code belongs in bench/",
        ),
    ]
    for brk, message in breaks:
        brk()
        problems = layout_problems(probe.dir, probe.import_name)
        assert any(message in p for p in problems), (message, problems)
