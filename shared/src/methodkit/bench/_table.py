"""Markdown tables rendered from benchmark records (READMEs and the repository report)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def fmt_number(x: float) -> str:
    """Four significant digits, scientific outside [1e-3, 1e4)."""
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-3:
        return f"{x:.3g}"
    return f"{x:.4g}"


def mean_std(row: Mapping[str, Any]) -> str:
    """``"mean ± std"`` of a result row, or ``"not measured"`` where its mean is null."""
    if row.get("mean") is None:
        return "not measured"
    return f"{fmt_number(row['mean'])} ± {fmt_number(row['std'])}"


def verdict_word(claim: Mapping[str, Any]) -> str:
    """A claim's verdict for a table: yes, **no**, not measured or full run only."""
    if claim["passed"] is None and claim.get("full_run_only"):
        return "full run only"
    return {True: "yes", False: "**no**", None: "not measured"}[claim["passed"]]


def md_cell(text: object) -> str:
    """Escape what would break a Markdown table cell (pipes, newlines)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _arrow(row: Mapping[str, Any]) -> str:
    hib = row.get("higher_is_better")
    return "" if hib is None else (" ↑" if hib else " ↓")


def records_table(records: Iterable[Mapping[str, Any]]) -> str:
    """Render the results of one or more records as a Markdown table.

    Args:
        records: Records as loaded by :func:`~methodkit.bench.load_record` (or ``to_dict()``).

    Returns:
        ``| benchmark | method | metric | mean ± std | seeds |`` plus one row per result.
    """
    lines = [
        "| benchmark | method | metric | mean ± std | seeds |",
        "|---|---|---|---|---|",
    ]
    for rec in records:
        for row in rec["results"]:
            bench, method, metric = (
                md_cell(x) for x in (rec["benchmark"], row["method"], row["metric"])
            )
            lines.append(
                f"| {bench} | {method} | {metric}{_arrow(row)} | {mean_std(row)} | {row['n']} |"
            )
    return "\n".join(lines)


def claims_table(records: Iterable[Mapping[str, Any]]) -> str:
    """Render every claim of the records: benchmark, claim, measured value, passed or not."""
    lines = ["| benchmark | claim | measured | passed |", "|---|---|---|---|"]
    for rec in records:
        for claim in rec["claims"]:
            mark = verdict_word(claim)
            measured = md_cell(claim.get("measured", "") or "—")
            lines.append(
                f"| {md_cell(rec['benchmark'])} | {md_cell(claim['text'])} | {measured} | {mark} |"
            )
    return "\n".join(lines)
