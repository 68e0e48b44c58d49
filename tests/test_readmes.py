"""Every package README has the sections of conventions §16, and its Quickstart runs."""

import re
import subprocess
import sys

import pytest

SECTIONS = [
    "Install",
    "Quickstart",
    "API",
    "Using it with real models",
    "Reproduction",
    "Limitations",
    "Citation",
]


def _sections(text):
    return re.findall(r"^## (.+?)\s*$", text, flags=re.MULTILINE)


def quickstart_code(text):
    match = re.search(r"^## Quickstart\s*$(.*?)^## ", text, flags=re.MULTILINE | re.DOTALL)
    assert match, "no Quickstart section"
    blocks = re.findall(r"```python\n(.*?)```", match.group(1), flags=re.DOTALL)
    assert len(blocks) == 1, "Quickstart needs exactly one ```python block"
    return blocks[0]


def test_readme_has_the_sections_in_order(package):
    text = (package.dir / "README.md").read_text()
    assert text.startswith(f"# {package.dist}\n")
    found = [s for s in _sections(text) if s in SECTIONS]
    assert found == SECTIONS, f"sections found: {_sections(text)}"


def test_quickstart_is_short(package):
    code = quickstart_code((package.dir / "README.md").read_text())
    lines = [ln for ln in code.splitlines() if ln.strip()]
    assert len(lines) <= 10, f"Quickstart has {len(lines)} lines, at most 10"


@pytest.mark.slow
def test_quickstart_runs(package, tmp_path):
    code = quickstart_code((package.dir / "README.md").read_text())
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=120)
