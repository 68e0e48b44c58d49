"""Rewrite committed benchmark records to the current schema without touching a number.

Usage: ``python -m methodkit.bench.upgrade packages/*/bench/results/*.json``

Schema 1 -> 2: the headline ``claim`` and the ``claims`` list become one ``claims`` list
(the headline first, never twice); ``--out DIR`` leaves ``command``; ``environment`` gains
``load_avg_start``/``load_avg_end`` as null (schema-1 runs did not record them).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from methodkit.bench._record import SCHEMA_VERSION, strip_out_option, validate_record


def upgrade_record(data: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``data`` in schema 2 (a schema-2 record is returned unchanged).

    Raises:
        ValueError: If the schema is unknown or the result is not a valid record.
    """
    out = dict(data)
    if out.get("schema") == SCHEMA_VERSION:
        validate_record(out)
        return out
    if out.get("schema") != 1:
        raise ValueError(f"cannot upgrade schema {out.get('schema')!r}")
    headline = out.pop("claim")
    claims = list(out.get("claims") or [])
    if headline not in claims:
        claims.insert(0, headline)
    out["claims"] = claims
    out["command"] = strip_out_option(out["command"])
    env = dict(out["environment"])
    env.setdefault("load_avg_start", None)
    env.setdefault("load_avg_end", None)
    out["environment"] = env
    out["schema"] = SCHEMA_VERSION
    validate_record(out)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Upgrade each JSON file named on the command line in place."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    for path in args.paths:
        data = json.loads(path.read_text())
        new = upgrade_record(data)
        if new != data:
            path.write_text(json.dumps(new, indent=2, allow_nan=False) + "\n")
            print(f"upgraded {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
