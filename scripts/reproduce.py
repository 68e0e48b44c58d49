"""Run every package's reproduction benchmark and write ``results/REPORT.md``.

Quick mode (default) runs ``bench/run.py --quick``; ``--full`` runs the full benchmarks.
Results go to ``results/<package>/`` (git-ignored), never over the committed
``bench/results`` of a package. Exits non-zero only when a benchmark crashed or wrote no
valid record; a claim that does not hold is reported in the table, not hidden.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from methodkit import progress
from methodkit.bench import load_record, md_cell

ROOT = Path(__file__).resolve().parent.parent


def _packages(only: str | None) -> list[Path]:
    dirs = sorted(p for p in (ROOT / "packages").glob("*") if (p / "bench" / "run.py").is_file())
    if only is not None:
        dirs = [p for p in dirs if p.name == only]
        if not dirs:
            sys.exit(f"no package {only!r} with a bench/run.py under packages/")
    return dirs


def _run_one(pkg: Path, out: Path, full: bool, timeout_s: float) -> tuple[str, float, list[dict]]:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.json"):
        old.unlink()
    cmd = [sys.executable, "bench/run.py", "--out", str(out)]
    if not full:
        cmd.append("--quick")
    start = time.perf_counter()
    with (out / "run.log").open("w") as log:
        try:
            rc = subprocess.run(
                cmd, cwd=pkg, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s
            ).returncode
        except subprocess.TimeoutExpired:
            rc = -1
    wall = time.perf_counter() - start
    records = []
    for path in sorted(out.glob("*.json")):
        try:
            records.append(load_record(path))
        except ValueError:
            return "error: invalid record " + path.name, wall, records
    if rc == -1:
        return f"error: timed out after {timeout_s:.0f} s", wall, records
    if not records:
        return f"error: exit {rc}, no record", wall, records
    claims_fell_short = any(c["passed"] is not True for r in records for c in r["claims"])
    if rc == 0 or (full and rc == 1 and claims_fell_short):
        return "ran", wall, records  # a full run exits 1 when a claim fails: it still ran
    return f"error: exit {rc}", wall, records


def _verdict(claim: dict | None) -> str:
    if claim is None:
        return "—"
    if claim["passed"] is None and claim.get("full_run_only"):
        return "full run only"
    return {True: "held", False: "**failed**", None: "not measured"}[claim["passed"]]


def _measured(claim: dict | None) -> str:
    return "—" if claim is None else md_cell(claim.get("measured") or "—")


def committed_records(pkg: Path) -> list[dict]:
    """The package's committed full-run records (bench/results/*.json)."""
    return [load_record(p) for p in sorted((pkg / "bench" / "results").glob("*.json"))]


def _claim_rows(
    committed: list[dict], fresh: list[dict]
) -> list[tuple[str, str, dict | None, dict | None]]:
    """(benchmark, claim text, committed claim, fresh claim), committed order first."""
    keyed: dict[tuple[str, str], list[dict | None]] = {}
    for slot, records in ((0, committed), (1, fresh)):
        for rec in records:
            for claim in rec["claims"]:
                keyed.setdefault((rec["benchmark"], claim["text"]), [None, None])[slot] = claim
    return [(b, t, c, f) for (b, t), (c, f) in keyed.items()]


def _totals(claims: list[dict | None]) -> str:
    """Held of judged (failed, not measured); claims left to the full run are counted apart."""
    present = [c for c in claims if c is not None]
    later = [c for c in present if c["passed"] is None and c.get("full_run_only")]
    judged = [c for c in present if c not in later]
    if not present:
        return "none"
    held = sum(c["passed"] is True for c in judged)
    failed = sum(c["passed"] is False for c in judged)
    unmeasured = sum(c["passed"] is None for c in judged)
    text = f"{held} of {len(judged)} held ({failed} failed, {unmeasured} not measured)"
    return text + (f"; {len(later)} full run only" if later else "")


def _plots(pkg_name: str, out_root: Path, fresh: list[dict]) -> str:
    """Links to the committed full-run plots and this run's plots of one package."""
    committed = ROOT / "packages" / pkg_name / "bench" / "results"
    n_committed = len(list(committed.glob("*.png")))
    fresh_pngs = [p for r in fresh if (p := out_root / pkg_name / f"{r['benchmark']}.png").exists()]
    links = (
        [f"[{n_committed} full-run](../packages/{pkg_name}/bench/results/)"] if n_committed else []
    )
    if fresh_pngs:
        links.append(f"[{len(fresh_pngs)} this run]({pkg_name}/)")
    return ", ".join(links) or "—"


def overview_rows(
    rows: list[tuple[str, str, float, list[dict], list[dict]]], out_root: Path
) -> list[str]:
    """One line a package: did it run, its committed full-run verdicts, this run's, its plots."""
    lines = [
        "| package | ran | wall time | committed full-run claims | this run's judged claims "
        "| plots | log |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, status, wall, fresh, committed in rows:
        full = _totals([c for r in committed for c in r["claims"]])
        this = _totals([c for r in fresh for c in r["claims"]])
        lines.append(
            f"| {name} | {md_cell(status)} | {wall:.0f} s | {full} | {this} "
            f"| {_plots(name, out_root, fresh)} | [run.log]({name}/run.log) |"
        )
    return lines


def _report(
    rows: list[tuple[str, str, float, list[dict], list[dict]]], full: bool, out_root: Path
) -> str:
    """REPORT.md: each claim's committed full-run verdict beside this run's, totals on top."""
    this = "this full run" if full else "this quick run"
    table = []
    all_committed, all_fresh = [], []
    for name, _status, _wall, fresh, committed in rows:
        for bench, text, c_claim, f_claim in _claim_rows(committed, fresh):
            all_committed.append(c_claim)
            all_fresh.append(f_claim)
            png = out_root / name / f"{bench}.png"
            plot = f"[png]({name}/{png.name})" if png.exists() else "—"
            table.append(
                f"| {name} | {md_cell(bench)} | {md_cell(text)} | {_measured(c_claim)} "
                f"| {_verdict(c_claim)} | {_measured(f_claim)} | {_verdict(f_claim)} | {plot} |"
            )
    ran = sum(row[1] == "ran" for row in rows)
    quick_note = (
        "This quick run is a smoke run on tiny configurations (about a minute per package): it "
        "shows that every benchmark runs end to end. It judges only claims that hold at any "
        "scale (exactness, contracts); the others read *full run only*, and their verdicts are "
        "the committed full-run records'."
    )
    lines = [
        "# Reproduction report",
        "",
        f"Generated by `make reproduce{' FULL=1' if full else ''}`.",
        "",
        f"- **Packages that ran end to end:** {ran} of {len(rows)}.",
        f"- **Full-scale claims (committed full-run records):** {_totals(all_committed)}.",
        f"- **Claims judged by {this}:** {_totals(all_fresh)}.",
        "",
        "" if full else quick_note,
        "",
        *overview_rows(rows, out_root),
    ]
    lines += [
        "",
        f"| package | benchmark | claim | full run: measured | full run: verdict "
        f"| {this}: measured | {this}: verdict | plot |",
        "|---|---|---|---|---|---|---|---|",
        *table,
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    """Run the selected benchmarks, write the report, return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="full benchmarks instead of --quick")
    parser.add_argument("--package", default=None, help="only this package (folder name)")
    parser.add_argument("--out", default=str(ROOT / "results"), help="output folder")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per package")
    args = parser.parse_args()
    out_root = Path(args.out).resolve()
    out_root.mkdir(parents=True, exist_ok=True)
    timeout_s = args.timeout or (6 * 3600 if args.full else 600)
    pkgs = _packages(args.package)
    if not pkgs:
        (out_root / "REPORT.md").write_text("# Reproduction report\n\nNo package yet.\n")
        print("no package with a bench/run.py under packages/ yet: nothing to reproduce")
        return 0
    rows = []
    for pkg in progress(pkgs, enabled=True, desc="reproduce", unit="pkg"):
        status, wall, records = _run_one(pkg, out_root / pkg.name, args.full, timeout_s)
        print(f"{pkg.name}: {status} ({wall:.0f} s, log: {out_root / pkg.name / 'run.log'})")
        rows.append((pkg.name, status, wall, records, committed_records(pkg)))
    report = out_root / "REPORT.md"
    report.write_text(_report(rows, args.full, out_root))
    _print_summary(rows, report)
    return 1 if any(row[1] != "ran" for row in rows) else 0


def _print_summary(
    rows: list[tuple[str, str, float, list[dict], list[dict]]], report: Path
) -> None:
    """What a newcomer needs on the console: what ran, the committed verdicts, where to look."""
    print(f"\n{'package':<14} {'ran':<24} committed full-run claims")
    for name, status, _wall, _fresh, committed in rows:
        full = _totals([c for r in committed for c in r["claims"]])
        print(f"{name:<14} {status[:24]:<24} {full}")
    crashed = [row[0] for row in rows if row[1] != "ran"]
    print(
        f"\n{len(rows) - len(crashed)} of {len(rows)} packages ran end to end"
        + (f"; crashed or timed out: {', '.join(crashed)}" if crashed else "")
    )
    print("full-run plots: packages/<package>/bench/results/*.png; this run's: results/<package>/")
    print(f"report: {report}")


if __name__ == "__main__":
    sys.exit(main())
