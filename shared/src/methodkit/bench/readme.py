"""Generate a package README's reproduction block from its committed benchmark records.

Usage::

    python -m methodkit.bench.readme packages/<pkg>          # rewrite the block
    python -m methodkit.bench.readme packages/<pkg> --check  # exit 1 if it is stale

The block stands between ``<!-- bench:start -->`` and ``<!-- bench:end -->`` in the package's
``README.md``. What it shows is declared in ``bench/readme.toml`` beside ``bench/run.py``::

    records = ["toy2d", "lattice"]      # optional: which records, in order (default: all)

    [[section]]
    kind = "claims"                     # every claim: measured value and verdict

    [[section]]
    kind = "results"                    # one row per (benchmark, method, metric)
    title = "Accuracy"                  # optional heading line
    records = ["toy2d"]                 # optional filters: records, methods, metrics
    metrics = ["sw2"]

    [[section]]
    kind = "pivot"                      # methods as rows, metrics as columns, one record
    record = "toy2d"

    [[section]]
    kind = "rows"                       # a list of dicts kept in a record's config
    record = "addition_n15"
    path = "per_seed"
    columns = ["method", "seed", "sum_accuracy"]

    [[section]]
    kind = "plots"                      # every PNG of the records (or `files = [...]`)

Every section takes ``details = "summary"`` to fold it. A "runs" table (command, wall time,
threads, load average, commit) always comes first: a number means little without how it was
made. Nothing in the block is typed by hand, and a root test regenerates every README.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from methodkit.bench._record import load_record
from methodkit.bench._table import claims_table, fmt_number, md_cell, mean_std, records_table

START, END = "<!-- bench:start -->", "<!-- bench:end -->"
SPEC_FILE = Path("bench") / "readme.toml"
_KINDS = ("claims", "results", "pivot", "rows", "plots")

Record = dict[str, Any]


def load_spec(package_dir: str | Path) -> dict[str, Any]:
    """Read ``bench/readme.toml`` of a package (an empty spec where there is none).

    Raises:
        ValueError: If a section has an unknown ``kind`` or lacks a required key.
    """
    path = Path(package_dir) / SPEC_FILE
    spec = tomllib.loads(path.read_text()) if path.is_file() else {}
    sections = spec.setdefault("section", [{"kind": "claims"}, {"kind": "results"}])
    for i, sec in enumerate(sections):
        kind = sec.get("kind")
        if kind not in _KINDS:
            raise ValueError(f"{path}: section {i} has kind {kind!r}; allowed: {_KINDS}")
        for key in {"pivot": ("record",), "rows": ("record", "path", "columns")}.get(kind, ()):
            if key not in sec:
                raise ValueError(f"{path}: section {i} ({kind}) needs {key!r}")
    return spec


def load_records(package_dir: str | Path, names: Sequence[str] | None = None) -> list[Record]:
    """Load the committed records of a package, in ``names`` order (default: sorted).

    Raises:
        FileNotFoundError: If a named record does not exist.
    """
    results = Path(package_dir) / "bench" / "results"
    if names is None:
        return [load_record(p) for p in sorted(results.glob("*.json"))]
    missing = [n for n in names if not (results / f"{n}.json").is_file()]
    if missing:
        raise FileNotFoundError(f"{results} has no record(s) {missing}")
    return [load_record(results / f"{n}.json") for n in names]


def _load_avg(env: Mapping[str, Any]) -> str:
    start, end = env.get("load_avg_start"), env.get("load_avg_end")
    if start is None or end is None:
        return "not recorded"
    return f"{start[0]:.1f} → {end[0]:.1f}"


def runs_table(records: Sequence[Record]) -> str:
    """One row per record: how its numbers were made."""
    lines = [
        "| benchmark | command | wall time | threads | load avg (1 min) start → end | commit |",
        "|---|---|---|---|---|---|",
    ]
    for rec in records:
        env = rec["environment"]
        lines.append(
            f"| {md_cell(rec['benchmark'])} | `{md_cell(rec['command'])}` "
            f"| {rec['wall_time_s'] / 60:.1f} min | {env.get('threads', '?')} "
            f"| {_load_avg(env)} | {rec['git_commit']} |"
        )
    return "\n".join(lines)


def _select(records: Sequence[Record], sec: Mapping[str, Any]) -> list[Record]:
    names = sec.get("records")
    chosen = [r for r in records if names is None or r["benchmark"] in names]
    methods, metrics = sec.get("methods"), sec.get("metrics")
    return [
        {
            **r,
            "results": [
                row
                for row in r["results"]
                if (methods is None or row["method"] in methods)
                and (metrics is None or row["metric"] in metrics)
            ],
        }
        for r in chosen
    ]


def _by_name(records: Sequence[Record], name: str) -> Record:
    for rec in records:
        if rec["benchmark"] == name:
            return rec
    raise ValueError(f"no record named {name!r} among {[r['benchmark'] for r in records]}")


def pivot_table(
    record: Record, methods: Sequence[str] | None, metrics: Sequence[str] | None
) -> str:
    """Methods as rows and metrics as columns (mean ± std) for one record."""
    rows = record["results"]
    metrics = list(metrics or dict.fromkeys(r["metric"] for r in rows))
    methods = list(methods or dict.fromkeys(r["method"] for r in rows))
    cell = {(r["method"], r["metric"]): r for r in rows}
    lines = [
        "| method | " + " | ".join(md_cell(m) for m in metrics) + " |",
        "|---" * (len(metrics) + 1) + "|",
    ]
    for method in methods:
        vals = []
        for metric in metrics:
            r = cell.get((method, metric))
            vals.append("—" if r is None else mean_std(r))
        lines.append(f"| {md_cell(method)} | " + " | ".join(vals) + " |")
    return "\n".join(lines)


def _dig(config: Mapping[str, Any], path: str) -> Any:
    value: Any = config
    for key in path.split("."):
        value = value[key]
    return value


def _value(x: Any) -> str:
    return fmt_number(x) if isinstance(x, float) else md_cell(x)


def config_rows_table(record: Record, path: str, columns: Sequence[str]) -> str:
    """A table of the list of dicts at ``config[path]`` (dotted), one column per key."""
    rows = _dig(record["config"], path)
    lines = ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(_value(row.get(c, "—")) for c in columns) + " |")
    return "\n".join(lines)


def _plots(records: Sequence[Record], sec: Mapping[str, Any], package_dir: Path) -> str:
    files = sec.get("files")
    if files is None:
        files = []
        for rec in _select(records, sec):
            name = rec["benchmark"]
            files.append(f"{name}.png")
            extra = sorted((package_dir / "bench" / "results").glob(f"{name}_*.png"))
            files.extend(p.name for p in extra)
    return "\n".join(f"![{Path(f).stem}](bench/results/{f})" for f in files)


def _section(records: Sequence[Record], sec: Mapping[str, Any], package_dir: Path) -> str:
    kind = sec["kind"]
    renderers: dict[str, Callable[[], str]] = {
        "claims": lambda: claims_table(_select(records, sec)),
        "results": lambda: records_table(_select(records, sec)),
        "pivot": lambda: pivot_table(
            _by_name(records, sec["record"]), sec.get("methods"), sec.get("metrics")
        ),
        "rows": lambda: config_rows_table(
            _by_name(records, sec["record"]), sec["path"], sec["columns"]
        ),
        "plots": lambda: _plots(records, sec, package_dir),
    }
    body = renderers[kind]()
    if sec.get("title"):
        body = f"{sec['title']}\n\n{body}"
    if sec.get("details"):
        body = f"<details><summary>{sec['details']}</summary>\n\n{body}\n\n</details>"
    return body


def render(package_dir: str | Path) -> str:
    """The generated block (without its markers) for the package at ``package_dir``."""
    package_dir = Path(package_dir)
    spec = load_spec(package_dir)
    records = load_records(package_dir, spec.get("records"))
    if not records:
        return "No benchmark record is committed yet (`make bench PKG=...` writes them)."
    parts = [
        f"Generated from `bench/results/*.json` by `python -m methodkit.bench.readme "
        f"packages/{package_dir.name}`; do not edit by hand.",
        runs_table(records),
    ]
    parts += [_section(records, sec, package_dir) for sec in spec["section"]]
    return "\n\n".join(parts)


def splice(text: str, body: str, where: str = "README.md") -> str:
    """Put ``body`` between the block markers of ``text``.

    Raises:
        ValueError: If the markers are missing, repeated or out of order.
    """
    if text.count(START) != 1 or text.count(END) != 1 or text.index(END) < text.index(START):
        raise ValueError(f"{where} needs exactly one {START} ... {END} pair, in this order")
    i, j = text.index(START) + len(START), text.index(END)
    return text[:i] + "\n" + body.rstrip("\n") + "\n" + text[j:]


def write(package_dir: str | Path) -> bool:
    """Regenerate the block in the package's README; return True if the file changed."""
    readme = Path(package_dir) / "README.md"
    text = readme.read_text()
    new = splice(text, render(package_dir), str(readme))
    if new != text:
        readme.write_text(new)
    return new != text


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: rewrite (or with ``--check`` verify) README blocks."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="+", help="package folders, e.g. packages/ess-flow")
    parser.add_argument("--check", action="store_true", help="only report stale READMEs")
    args = parser.parse_args(argv)
    stale = []
    for pkg in args.packages:
        readme = Path(pkg) / "README.md"
        if args.check:
            if splice(readme.read_text(), render(pkg), str(readme)) != readme.read_text():
                stale.append(str(readme))
        elif write(pkg):
            print(f"rewrote {readme}")
    for path in stale:
        print(f"{path}: the bench block differs from its records", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
