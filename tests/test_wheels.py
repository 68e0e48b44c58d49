"""Each built wheel names ``methodkit`` at run time exactly when its ``src/`` imports it.

A user who runs ``pip install ema-nesterov`` should get torch and ema-nesterov, not the
repository's core; a package whose library code shows progress bars (``methodkit.progress``)
brings the light core (numpy, tqdm); bench and test needs belong in extras. The wheels are
built once per session with uv.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest


def uv_command() -> list[str]:
    """How to call uv here: $UV (the Makefile exports it), uv on PATH, or python3 -m uv."""
    if os.environ.get("UV"):
        return os.environ["UV"].split()
    if shutil.which("uv"):
        return ["uv"]
    python3 = shutil.which("python3") or sys.executable
    return [python3, "-m", "uv"]


@pytest.fixture(scope="session")
def wheel_dir(tmp_path_factory, repo_root):
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run(
        [*uv_command(), "build", "-q", "--all-packages", "--wheel", "-o", str(out)],
        cwd=repo_root,
        check=True,
        timeout=600,
    )
    return out


def runtime_requirements(wheel: Path) -> list[str]:
    """Requires-Dist entries of a wheel that apply without any extra."""
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        msg = Parser().parsestr(zf.read(meta).decode())
    reqs = msg.get_all("Requires-Dist") or []
    return [r for r in reqs if "extra ==" not in r]


def src_imports_methodkit(src: Path) -> bool:
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            if any(n.split(".")[0] == "methodkit" for n in names):
                return True
    return False


def names_methodkit(requirements: list[str]) -> bool:
    return any(re.match(r"methodkit\b", r) for r in requirements)


def methodkit_mismatch(wheel: Path, src: Path) -> str | None:
    """Why the wheel's run-time methodkit need disagrees with its source (None: it agrees)."""
    named, imported = names_methodkit(runtime_requirements(wheel)), src_imports_methodkit(src)
    if named and not imported:
        return f"{wheel.name} requires methodkit but nothing under {src} imports it"
    if imported and not named:
        return f"{src} imports methodkit but {wheel.name} does not require it"
    return None


@pytest.mark.slow
def test_wheel_requires_methodkit_only_where_src_imports_it(package, wheel_dir):
    wheels = list(wheel_dir.glob(f"{package.import_name}-*.whl"))
    assert len(wheels) == 1, f"expected one wheel for {package.dist}, found {wheels}"
    assert methodkit_mismatch(wheels[0], package.dir / "src" / package.import_name) is None


def _fake_wheel(path, requires):
    with zipfile.ZipFile(path, "w") as zf:
        body = "Metadata-Version: 2.4\nName: probe-pkg\nVersion: 0.1.0\n" + "".join(
            f"Requires-Dist: {r}\n" for r in requires
        )
        zf.writestr("probe_pkg-0.1.0.dist-info/METADATA", body)
    return path


def test_the_check_catches_both_mismatches(probe, tmp_path):
    src = probe.dir / "src" / probe.import_name
    bench_only = ['methodkit[bench]<0.2,>=0.1; extra == "bench"', "numpy>=1.26"]
    assert methodkit_mismatch(_fake_wheel(tmp_path / "a.whl", bench_only), src) is None
    runtime = [*bench_only, "methodkit<0.2,>=0.1"]
    message = methodkit_mismatch(_fake_wheel(tmp_path / "b.whl", runtime), src)
    assert "requires methodkit but nothing" in message
    (src / "uses_core.py").write_text("from methodkit import rng\n")
    message = methodkit_mismatch(_fake_wheel(tmp_path / "c.whl", bench_only), src)
    assert "imports methodkit but" in message
