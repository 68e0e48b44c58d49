"""The repository stands on its own: its license, and no pointer to files outside it."""

import os
import re
from pathlib import Path

OUTSIDE = re.compile(r"conventions\.md|\.\./shared/|\bconventions §")
SKIP = {".venv", ".tools", ".git", "results", "dist", "node_modules"}


def _text_files(root):
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP]  # never descend into .venv and the like
        for name in files:
            path = Path(folder) / name
            if path.resolve() == Path(__file__).resolve():
                continue
            if path.suffix in {".md", ".py", ".toml", ".cfg", ".txt"} or name == "Makefile":
                yield path


def test_license_is_the_mit_license_the_metadata_declares(repo_root):
    assert (repo_root / "LICENSE").read_text().startswith("MIT License")


def test_nothing_points_outside_the_repository(repo_root):
    hits = [
        f"{path.relative_to(repo_root)}:{n}"
        for path in _text_files(repo_root)
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert hits == [], "the repo's own CONTRIBUTING.md holds the conventions"
