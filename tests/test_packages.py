"""Every package: layout, naming, standalone import, no import of another package."""

import ast
import json
import re
import subprocess
import sys
import tomllib


def test_layout_and_names(package):
    meta = tomllib.loads((package.dir / "pyproject.toml").read_text())
    assert package.dir.name == package.dist, "folder name must equal the distribution name"
    src = package.dir / "src" / package.import_name
    assert (src / "__init__.py").is_file()
    assert (src / "py.typed").is_file()
    assert (package.dir / "bench" / "run.py").is_file()
    assert list((package.dir / "tests").glob("test_*.py")), "a package needs tests"
    assert not (package.dir / "tests" / "__init__.py").exists()
    deps = meta["project"]["dependencies"]
    core = [d for d in deps if re.match(r"methodkit\b", d)]
    assert all(re.match(r"methodkit(\[[\w,\s]+\])?\s*>=", d) for d in core), "methodkit>=..."
    assert meta["build-system"]["build-backend"] == "uv_build"
    assert not [d for d in deps if "==" in d], "never pin == in a package"


def _imported_top_levels(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def test_no_source_imports_another_package(package, all_import_names):
    others = all_import_names - {package.import_name}
    offenders = []
    for folder in ("src", "tests", "bench"):
        for path in (package.dir / folder).rglob("*.py"):
            offenders += [f"{path}: {m}" for m in _imported_top_levels(path) if m in others]
    assert not offenders


def test_imports_alone_with_matching_version(package, all_import_names):
    code = (
        "import importlib.metadata, json, sys\n"
        f"import {package.import_name} as m\n"
        "print(json.dumps({'version': m.__version__,\n"
        f"  'meta': importlib.metadata.version({package.dist!r}),\n"
        "  'modules': sorted(sys.modules)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    info = json.loads(out.stdout.splitlines()[-1])
    assert info["version"] == info["meta"]
    loaded_others = (all_import_names - {package.import_name}) & set(info["modules"])
    assert not loaded_others


def test_root_readme_lists_every_package(package, repo_root):
    assert f"packages/{package.dist}" in (repo_root / "README.md").read_text()
