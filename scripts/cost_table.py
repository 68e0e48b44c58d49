"""Write the root README's "cost at a glance" table from the packages' committed records.

Each package's cost suite (issue 51) keeps a list of comparisons in its record's
``config["cost"]``, headline first; each entry names the axis and unit, this method's value,
the peer's value, their ratio (method / peer, the median of per-repetition ratios for timings),
the statistic and the load average during the repetitions. The table takes, per package, the
first entry of ``bench/results/cost.json`` or, where a package has none, of the first record
(in name order) whose config carries a ``cost`` list. Nothing in the table is typed by hand.

Usage::

    python scripts/cost_table.py            # rewrite the block in README.md
    python scripts/cost_table.py --check    # exit 1 if the block is stale
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- cost:start -->", "<!-- cost:end -->"
REQUIRED = ("axis", "unit", "method", "value", "peer", "peer_value", "ratio", "statistic")


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return None
    return float(x)


def validate_entry(entry: Any, where: str) -> dict[str, Any]:
    """Check one ``config["cost"]`` entry; return it.

    Raises:
        ValueError: Naming the record and the missing or ill-typed key.
    """
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where}: a cost entry must be a dict, got {type(entry).__name__}")
    for key in REQUIRED:
        if key not in entry:
            raise ValueError(f"{where}: cost entry lacks {key!r} (needs {', '.join(REQUIRED)})")
    for key in ("axis", "unit", "method", "peer", "statistic"):
        if not isinstance(entry[key], str) or not entry[key]:
            raise ValueError(f"{where}: cost entry {key!r} must be a non-empty string")
    for key in ("value", "peer_value", "ratio"):
        if entry[key] is not None and _number(entry[key]) is None:
            raise ValueError(f"{where}: cost entry {key!r} must be a finite number or null")
    return dict(entry)


def _cost_list(path: Path) -> list[Any] | None:
    data = json.loads(path.read_text())
    cost = data.get("config", {}).get("cost")
    return cost if isinstance(cost, list) and cost else None


def headline(package_dir: Path) -> tuple[dict[str, Any], dict[str, Any], Path] | None:
    """``(entry, record, path)`` of a package's headline cost comparison, or None.

    Raises:
        ValueError: If that entry lacks a field or has an ill-typed one.
    """
    results = package_dir / "bench" / "results"
    paths = sorted(results.glob("*.json"))
    paths.sort(key=lambda p: p.name != "cost.json")  # cost.json first, the rest by name
    for path in paths:
        cost = _cost_list(path)
        if cost is not None:
            record = json.loads(path.read_text())
            return validate_entry(cost[0], str(path)), record, path
    return None


def fmt(x: Any) -> str:
    """Four significant digits; "not measured" for null or non-finite."""
    v = _number(x)
    if v is None:
        return "not measured"
    if v != 0 and (abs(v) >= 1e4 or abs(v) < 1e-3):
        return f"{v:.3g}"
    return f"{v:.4g}"


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _load(entry: Mapping[str, Any], record: Mapping[str, Any]) -> str:
    load = entry.get("load_avg") or record.get("environment", {}).get("load_avg_end")
    return "—" if not load else f"{load[0]:.2f}"


def _claims(record: Mapping[str, Any]) -> str:
    claims = record.get("claims", [])
    held = sum(c.get("passed") is True for c in claims)
    failed = sum(c.get("passed") is False for c in claims)
    rest = len(claims) - held - failed
    text = f"{held} held, {failed} failed"
    return text + (f", {rest} not measured" if rest else "")


def table(root: Path = ROOT) -> str:
    """The Markdown table: one row per package that has a cost record."""
    lines = [
        "| package | cost axis | this method | peer | ratio (method / peer) | statistic "
        "| load avg (1 min) | claims of that record |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for pkg in sorted(p for p in (root / "packages").iterdir() if p.is_dir()):
        found = headline(pkg)
        if found is None:
            continue
        e, rec, path = found
        ratio = "not measured" if _number(e["ratio"]) is None else f"{fmt(e['ratio'])}x"
        arrow = {True: " (lower is better)", False: " (higher is better)"}.get(
            e.get("lower_is_better"), ""
        )
        rel = path.relative_to(root).as_posix()
        lines.append(
            "| "
            + " | ".join(
                _cell(x)
                for x in (
                    f"[`{pkg.name}`]({rel})",
                    f"{e['axis']} [{e['unit']}]{arrow}",
                    f"{e['method']}: {fmt(e['value'])}",
                    f"{e['peer']}: {fmt(e['peer_value'])}",
                    ratio,
                    e["statistic"],
                    _load(e, rec),
                    _claims(rec),
                )
            )
            + " |"
        )
    return "\n".join(lines)


def block(root: Path = ROOT) -> str:
    """The generated README block, markers included."""
    note = (
        "Generated by `python scripts/cost_table.py` from each package's committed cost record "
        "(`bench/results/cost.json`, else the first record whose config has a `cost` list): "
        "the headline comparison, method and peer measured side by side in one process. "
        "Timings come from a shared 2-core machine: the load average during the repetitions "
        "is in the table, and a ratio measured under load is noisier than its digits suggest."
    )
    return f"{START}\n{note}\n\n{table(root)}\n{END}"


def rewrite(text: str, new_block: str) -> str:
    """``text`` with the block between the markers replaced.

    Raises:
        ValueError: If the markers are missing or out of order.
    """
    i, j = text.find(START), text.find(END)
    if i < 0 or j < i:
        raise ValueError(f"README lacks {START} ... {END}")
    return text[:i] + new_block + text[j + len(END) :]


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite (or ``--check``) the block in the root README."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the block is stale")
    parser.add_argument("--readme", default=str(ROOT / "README.md"))
    args = parser.parse_args(argv)
    path = Path(args.readme)
    old = path.read_text()
    new = rewrite(old, block())
    if args.check:
        if new != old:
            print(f"{path}: cost table is stale; run python scripts/cost_table.py", file=sys.stderr)
            return 1
        return 0
    path.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
