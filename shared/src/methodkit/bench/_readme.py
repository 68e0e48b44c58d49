"""Write generated Markdown into a README between a block's start and end markers."""

from __future__ import annotations

import os
from pathlib import Path


def write_readme_block(readme: str | os.PathLike[str], body: str, name: str = "table") -> bool:
    """Replace what stands between the two markers of block ``name`` with ``body``.

    Package READMEs keep their reproduction tables between such markers so that a script
    regenerates them from the benchmark records instead of anyone typing numbers.

    Args:
        readme: Path of the Markdown file.
        body: The new content (a trailing newline is added if missing).
        name: Block name; the markers are ``<!-- {name}:start -->`` and ``<!-- {name}:end -->``.

    Returns:
        True if the file changed.

    Raises:
        ValueError: If either marker is missing or they are out of order.
    """
    path = Path(readme)
    text = path.read_text()
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    i, j = text.find(start), text.find(end)
    if i < 0 or j < 0 or j < i:
        raise ValueError(f"{path} lacks the markers {start} ... {end} (in this order)")
    new = text[: i + len(start)] + "\n" + body.rstrip("\n") + "\n" + text[j:]
    if new == text:
        return False
    path.write_text(new)
    return True
