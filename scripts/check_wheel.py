"""Install one package's wheel into a fresh venv, as a user would, and run its fast tests there.

    python scripts/check_wheel.py esensc

Builds the package wheel (and the core's), creates an empty venv, installs the wheel by path
with every extra but ``bench`` and third-party versions pinned to ``uv.lock``, and runs
``pytest -m "not slow and not bench"`` in the package folder. The core's wheel is offered only
when the package needs it at run time or through those extras, so a package that does not use
``methodkit`` is proven to install and work without it.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def uv() -> list[str]:
    """The uv command: $UV (exported by the Makefile) or uv on PATH."""
    return shlex.split(os.environ.get("UV", "uv"))


def run(cmd: list[str], **kw: object) -> None:
    """Echo and run a command; fail on a non-zero exit."""
    print("+", shlex.join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]


def needs_core(meta: dict, extras: list[str]) -> bool:
    """Whether the run-time dependencies or the named extras require methodkit."""
    project = meta["project"]
    deps = list(project.get("dependencies", []))
    for extra in extras:
        deps += project.get("optional-dependencies", {}).get(extra, [])
    return any(re.match(r"methodkit\b", d) for d in deps)


def main(argv: list[str] | None = None) -> int:
    """Check one package's wheel; return 0 (a failing step raises)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", help="package folder name under packages/")
    args = parser.parse_args(argv)
    pkg_dir = ROOT / "packages" / args.package
    if not (pkg_dir / "pyproject.toml").is_file():
        sys.exit(f"no such package: {pkg_dir}")
    meta = tomllib.loads((pkg_dir / "pyproject.toml").read_text())
    dist = meta["project"]["name"]
    # every extra a user would install with the library; `bench` is the repository's own
    extras = sorted(set(meta["project"].get("optional-dependencies", {})) - {"bench"})
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp) / "wheels"
        run([*uv(), "build", "-q", "--package", dist, "--wheel", "-o", str(wheels)], cwd=ROOT)
        core = needs_core(meta, extras)
        if core:
            run(
                [*uv(), "build", "-q", "--package", "methodkit", "--wheel", "-o", str(wheels)],
                cwd=ROOT,
            )
        venv = Path(tmp) / "venv"
        run([*uv(), "venv", "-q", str(venv)])
        pins = Path(tmp) / "pins.txt"
        run(
            [
                *uv(),
                "export",
                "-q",
                "--frozen",
                "--package",
                dist,
                "--all-extras",
                "--no-dev",
                "--no-emit-workspace",
                "--no-hashes",
                "-o",
                str(pins),
            ],
            cwd=ROOT,
        )
        python = str(venv / "bin" / "python")
        wheel = next(wheels.glob(f"{dist.replace('-', '_')}-*.whl"))
        target = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
        offered = [target, *(map(str, wheels.glob("methodkit-*.whl")) if core else [])]
        run(
            [*uv(), "pip", "install", "-q", "--python", python, "-c", str(pins), *offered, "pytest"]
        )
        print(f"methodkit wheel offered: {'yes' if core else 'no'}", flush=True)
        run(
            [
                python,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-m",
                "not slow and not bench",
                "tests",
            ],
            cwd=pkg_dir,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
