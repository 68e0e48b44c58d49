"""Benchmarks (CONTRIBUTING.md §6): one runner, one record schema, the standard plot, tables.

Every ``bench/run.py`` is a few lines over :func:`run_suite`; each benchmark returns an
:class:`Outcome` whose claims are built with :func:`check` or :func:`compare`, so that a
claim resting on missing or degenerate numbers is "not measured", never passed. README
tables come from the committed records through ``python -m methodkit.bench.readme``.
Plotting needs ``methodkit[bench]`` (matplotlib); memory measurement needs torch.
"""

from methodkit.bench._claims import check, compare
from methodkit.bench._cli import bench_parser, set_threads
from methodkit.bench._cost import cost_entry, interleaved, stable_ratio
from methodkit.bench._memory import ForwardCounter, peak_memory
from methodkit.bench._plot import plot_results
from methodkit.bench._record import (
    BenchRecord,
    Claim,
    ResultRow,
    environment,
    load_average,
    load_record,
    save_record,
    validate_record,
)
from methodkit.bench._suite import (
    Outcome,
    enforce_measured,
    judge_at_scale,
    run_suite,
    summarize,
)
from methodkit.bench._table import claims_table, md_cell, records_table

__all__ = [
    "BenchRecord",
    "Claim",
    "ForwardCounter",
    "Outcome",
    "ResultRow",
    "bench_parser",
    "check",
    "claims_table",
    "compare",
    "cost_entry",
    "enforce_measured",
    "environment",
    "interleaved",
    "judge_at_scale",
    "load_average",
    "load_record",
    "md_cell",
    "peak_memory",
    "plot_results",
    "records_table",
    "run_suite",
    "save_record",
    "set_threads",
    "stable_ratio",
    "summarize",
    "validate_record",
]
