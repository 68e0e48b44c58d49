"""Every package README has the sections of CONTRIBUTING.md §7, and its Quickstart runs."""

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


def _quickstart(text):
    match = re.search(r"^## Quickstart\s*$(.*?)^## ", text, flags=re.MULTILINE | re.DOTALL)
    assert match, "no Quickstart section"
    return match.group(1)


def quickstart_code(text):
    blocks = re.findall(r"```python\n(.*?)```", _quickstart(text), flags=re.DOTALL)
    assert len(blocks) == 1, "Quickstart needs exactly one ```python block"
    return blocks[0]


def quickstart_output(text):
    """The ```text block after ``Output:`` in the Quickstart: what the code prints."""
    blocks = re.findall(r"^Output:\s*\n+```text\n(.*?)```", _quickstart(text), re.M | re.S)
    assert len(blocks) == 1, "Quickstart needs one `Output:` line followed by a ```text block"
    return blocks[0].splitlines()


def line_matches(expected, actual):
    """``...`` inside an expected line stands for any text (digits that vary, addresses)."""
    pattern = ".*".join(re.escape(part) for part in expected.split("..."))
    return re.fullmatch(pattern, actual.rstrip()) is not None


def output_mismatches(expected, actual):
    if len(expected) != len(actual):
        return [f"{len(actual)} printed lines, the README shows {len(expected)}"]
    return [
        f"printed {a!r}, the README shows {e!r}"
        for e, a in zip(expected, actual, strict=True)
        if not line_matches(e, a)
    ]


def test_readme_has_the_sections_in_order(package):
    text = (package.dir / "README.md").read_text()
    assert text.startswith(f"# {package.dist}\n")
    found = [s for s in _sections(text) if s in SECTIONS]
    assert found == SECTIONS, f"sections found: {_sections(text)}"


def test_quickstart_is_short(package):
    code = quickstart_code((package.dir / "README.md").read_text())
    lines = [ln for ln in code.splitlines() if ln.strip()]
    assert len(lines) <= 10, f"Quickstart has {len(lines)} lines, at most 10"


def test_output_matching_rules():
    assert line_matches("loss 0.1...", "loss 0.1234")
    assert line_matches("[... 2.0]", "[1.5 2.0]")
    assert not line_matches("loss 0.1...", "loss 0.2")
    assert output_mismatches(["a", "b..."], ["a", "bc"]) == []
    assert output_mismatches(["a"], ["a", "b"]) == ["2 printed lines, the README shows 1"]
    assert output_mismatches(["True"], ["False"]) == ["printed 'False', the README shows 'True'"]


@pytest.mark.slow
def test_quickstart_prints_what_the_readme_shows(package, tmp_path):
    text = (package.dir / "README.md").read_text()
    code, expected = quickstart_code(text), quickstart_output(text)
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert output_mismatches(expected, out.stdout.splitlines()) == []
