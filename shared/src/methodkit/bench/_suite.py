"""One runner for every ``bench/run.py``: options, threads, timing, records, plots, exit code.

A package's script names its benchmarks and hands them to :func:`run_suite`::

    def main(argv=None):
        return run_suite("ess-flow", {"toy2d": toy2d, "lattice": lattice}, argv)

Each benchmark is a function ``fn(args) -> Outcome``; ``args`` carries the standard options
(``--quick --seeds --threads --only --out``) plus any the script adds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from methodkit.bench._claims import missing_inputs
from methodkit.bench._cli import bench_parser, set_threads
from methodkit.bench._plot import plot_results
from methodkit.bench._record import (
    BenchRecord,
    Claim,
    ResultRow,
    environment,
    load_average,
    save_record,
)
from methodkit.bench._table import claims_table, records_table

#: ``plot(record_dict, path)`` draws one extra figure into ``path``.
ExtraPlot = Callable[[dict[str, Any], Path], None]


@dataclass
class Outcome:
    """What one benchmark function returns to :func:`run_suite`.

    Attributes:
        config: The configuration that produced the numbers (saved in the record).
        results: One :class:`ResultRow` per (method, metric).
        claims: The claims checked, headline first (build them with ``check``/``compare``).
        seeds: Seeds actually used, if not ``args.seeds``.
        plot_metrics: Metrics in the standard bar plot (default: all).
        units: ``{metric: unit}`` for the standard plot's axis labels.
        labels: ``{metric: words}`` for the standard plot's axis labels (default: the key).
        extra_plots: ``{suffix: plot}``; each writes ``<benchmark>_<suffix>.png``.
        device: Device the benchmark ran on (recorded in ``environment``).
    """

    config: dict[str, Any]
    results: list[ResultRow]
    claims: list[Claim]
    seeds: list[int] | None = None
    plot_metrics: Sequence[str] | None = None
    units: Mapping[str, str] | None = None
    labels: Mapping[str, str] | None = None
    extra_plots: Mapping[str, ExtraPlot] = field(default_factory=dict)
    device: str = "cpu"


def _caller_bench_dir() -> Path:
    frame = sys._getframe(2)  # run_suite's caller
    file = frame.f_globals.get("__file__")
    return Path(file).resolve().parent if file else Path.cwd() / "bench"


def enforce_measured(claim: Claim) -> Claim:
    """Turn a claim that passes on missing, NaN or infinite inputs into "not measured"."""
    if claim.passed is not None and missing_inputs(claim.inputs):
        return replace(claim, passed=None)
    if claim.passed is not None and not isinstance(claim.passed, bool):
        return replace(claim, passed=bool(claim.passed))
    return claim


def judge_at_scale(claim: Claim, quick: bool) -> Claim:
    """On a ``--quick`` run keep only the verdicts of claims marked ``quick``.

    A quick run is a smoke run on a tiny configuration: a speed-up or accuracy claim judged
    there says nothing about the method. Its other claims keep their measured text but record
    "full run only" instead of a verdict.
    """
    if not quick or claim.quick:
        return claim
    return replace(claim, passed=None, full_run_only=True)


def _standard_parser(
    description: str, names: Sequence[str], default_out: Path
) -> argparse.ArgumentParser:
    parser = bench_parser(description, default_out=str(default_out))
    parser.add_argument(
        "--only", nargs="+", choices=list(names), default=list(names), help="benchmarks to run"
    )
    return parser


def _run_one(
    package: str, name: str, fn: Callable[[argparse.Namespace], Outcome], args: Any
) -> dict[str, Any]:
    scale = "quick" if args.quick else "full"
    print(f"[{package}] running {name} ({scale} run) ...", file=sys.stderr, flush=True)
    load_start = load_average()
    t0 = time.perf_counter()
    outcome = fn(args)
    wall = time.perf_counter() - t0
    if not isinstance(outcome, Outcome):
        raise TypeError(f"benchmark {name!r} returned {type(outcome).__name__}, not Outcome")
    if not outcome.claims:
        raise ValueError(f"benchmark {name!r} checked no claim")
    env = environment(args.threads, outcome.device)
    env["load_avg_start"], env["load_avg_end"] = load_start, load_average()
    record = BenchRecord(
        package=package,
        benchmark=name,
        config={**outcome.config, "quick": bool(args.quick)},
        seeds=list(outcome.seeds if outcome.seeds is not None else args.seeds),
        results=list(outcome.results),
        claims=[judge_at_scale(enforce_measured(c), bool(args.quick)) for c in outcome.claims],
        wall_time_s=wall,
        environment=env,
    )
    path = save_record(record, args.out)
    data = record.to_dict()
    plot_results(
        data, path.with_suffix(".png"), outcome.plot_metrics, outcome.units, outcome.labels
    )
    for suffix, plot in outcome.extra_plots.items():
        plot(data, path.with_name(f"{name}_{suffix}.png"))
    print(f"[{name}] {wall:.0f} s -> {path}", file=sys.stderr, flush=True)
    return data


def summarize(records: Sequence[Mapping[str, Any]], quick: bool) -> int:
    """Print the results and claims tables; return the exit code.

    A full run exits 1 when any claim failed or was not measured; a ``--quick`` run (a smoke
    run on a tiny configuration) reports its claims and exits 0: only claims marked ``quick``
    are judged there, the others read "full run only".
    """
    print(records_table(records))
    print()
    print(claims_table(records))
    bad = [c for r in records for c in r["claims"] if c["passed"] is not True]
    if quick or not bad:
        return 0
    print(f"\n{len(bad)} claim(s) failed or not measured", file=sys.stderr)
    return 1


def run_suite(
    package: str,
    benchmarks: Mapping[str, Callable[[argparse.Namespace], Outcome]],
    argv: Sequence[str] | None = None,
    *,
    description: str | None = None,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    bench_dir: str | Path | None = None,
) -> int:
    """Parse the standard options, run the selected benchmarks, save records and plots.

    Args:
        package: Distribution name (``"ess-flow"``).
        benchmarks: ``{name: fn}`` in run order; ``fn(args)`` returns an :class:`Outcome`.
        argv: Command-line arguments (default ``sys.argv[1:]``).
        description: The ``--help`` text (default: the package name).
        add_arguments: Adds a script's own options to the parser.
        bench_dir: The package's ``bench/`` folder (default: the calling script's folder);
            ``--out`` defaults to its ``results/`` wherever the script is started from.

    Returns:
        The exit code (see :func:`summarize`).

    Raises:
        ValueError: If ``benchmarks`` is empty.
    """
    if not benchmarks:
        raise ValueError("benchmarks must name at least one benchmark")
    here = Path(bench_dir).resolve() if bench_dir is not None else _caller_bench_dir()
    parser = _standard_parser(
        description or f"{package} benchmarks", list(benchmarks), here / "results"
    )
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(None if argv is None else list(argv))
    set_threads(args.threads)
    records = []
    for name in args.only:
        records.append(_run_one(package, name, benchmarks[name], args))
    return summarize(records, args.quick)
