"""English prose from Python's own documentation (``pydoc_data.topics``), with its hash.

The corpus is fixed for a given Python release, so a benchmark records the hash and the
Python version; the hashes we have checked are pinned in :data:`PINNED_SHA256`.
"""

from __future__ import annotations

import hashlib
import platform
import warnings
from dataclasses import dataclass

# sha256 of the joined corpus, by Python version; add a line when a new version is checked.
PINNED_SHA256: dict[str, str] = {
    "3.11.7": "71f2ff5d99bdc1f9c48c5c2353ad138201c5ca1c377e0226857ef8fa89b8bcee",
}


@dataclass(frozen=True)
class StdlibText:
    """The corpus text, its sha256, the Python version it came from, and whether it is pinned."""

    text: str
    sha256: str
    python_version: str
    pinned: bool


def load_stdlib_text(strict: bool = False) -> StdlibText:
    """Return the 79 ``pydoc_data.topics`` entries joined in sorted-key order (~0.47 MB).

    Args:
        strict: Raise instead of warning when the text differs from the pinned hash of
            this Python version (or no hash is pinned for it).

    Returns:
        The corpus and its provenance.

    Raises:
        RuntimeError: In strict mode, if the hash is not the pinned one.
    """
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[key] for key in sorted(topics))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    version = platform.python_version()
    expected = PINNED_SHA256.get(version)
    pinned = expected == digest
    if not pinned:
        msg = (
            f"stdlib text of Python {version} has sha256 {digest[:12]}..., "
            f"pinned: {expected[:12] + '...' if expected else 'none for this version'}"
        )
        if strict:
            raise RuntimeError(msg)
        warnings.warn(msg, stacklevel=2)
    return StdlibText(text=text, sha256=digest, python_version=version, pinned=pinned)
