"""Create a new method package from the template: every root test passes as created.

    python scripts/new_package.py my-method [--title "My Method"]
    make lock && make sync     # then: the workspace knows the package

Writes ``packages/<name>/`` (pyproject, README with the required sections and the bench
markers, the method module ``src/<import>/_<import>.py``, ``baselines.py``,
``tests/reference.py``, a test module, ``bench/run.py`` over ``run_suite`` and
``bench/readme.toml``) and adds the package's line to the root README. The stand-in method is a
trimmed mean: replace it with the paper's algorithm, keeping the shape.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = Path(__file__).resolve().parent / "template"

# template file -> path inside the package ({import_name} is substituted)
FILES = {
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "init.py.tmpl": "src/{import_name}/__init__.py",
    "method.py.tmpl": "src/{import_name}/_{import_name}.py",
    "baselines.py.tmpl": "src/{import_name}/baselines.py",
    "reference.py.tmpl": "tests/reference.py",
    "test_method.py.tmpl": "tests/test_method.py",
    "run.py.tmpl": "bench/run.py",
    "readme.toml.tmpl": "bench/readme.toml",
}
NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def add_to_root_readme(readme: Path, dist: str, import_name: str) -> None:
    """Insert the package's row into the root README's package table, in name order."""
    lines = readme.read_text().splitlines(keepends=True)
    row = f"| [`packages/{dist}`](packages/{dist}) (`{import_name}`) | (one line: what it is) |\n"
    rows = [i for i, ln in enumerate(lines) if ln.startswith("| [`packages/")]
    if not rows:
        raise SystemExit(f"{readme} has no package table rows to extend")
    at = next((i for i in rows if lines[i] > row), rows[-1] + 1)
    lines.insert(at, row)
    readme.write_text("".join(lines))


def create(dist: str, title: str | None = None, root: Path = ROOT) -> Path:
    """Write the package skeleton under ``root/packages/<dist>``; return its folder.

    Raises:
        ValueError: If the name is not a lowercase, hyphenated distribution name.
        FileExistsError: If the package folder exists already.
    """
    if not NAME.match(dist):
        raise ValueError(f"package name must be lowercase words joined by '-', got {dist!r}")
    import_name = dist.replace("-", "_")
    target = root / "packages" / dist
    if target.exists():
        raise FileExistsError(f"{target} exists already")
    values = {"dist": dist, "import_name": import_name, "title": title or dist}
    for template, rel in FILES.items():
        path = target / rel.format(**values)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((TEMPLATE / template).read_text().format(**values))
    (target / "src" / import_name / "py.typed").write_text("")
    (target / "bench" / "results").mkdir(parents=True)
    add_to_root_readme(root / "README.md", dist, import_name)
    return target


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="distribution name, e.g. ep-flow")
    parser.add_argument("--title", help="the method's display name (default: the name)")
    args = parser.parse_args(argv)
    try:
        target = create(args.name, args.title)
    except (ValueError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"created {target.relative_to(ROOT)}")
    print(f"next: make lock && make sync && make test PKG={args.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
