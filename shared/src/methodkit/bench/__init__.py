"""Benchmark records (conventions §12): schema, saving, the standard plot and Markdown tables.

Every ``bench/run.py`` builds :class:`BenchRecord` objects, saves them with
:func:`save_record`, and the package README's table is rendered by :func:`records_table`.
Plotting needs ``methodkit[bench]`` (matplotlib); everything else needs numpy only.
"""

from methodkit.bench._cli import bench_parser, finish, set_threads
from methodkit.bench._plot import plot_results
from methodkit.bench._readme import write_readme_block
from methodkit.bench._record import (
    SCHEMA_VERSION,
    BenchRecord,
    Claim,
    ResultRow,
    environment,
    load_record,
    save_record,
    validate_record,
)
from methodkit.bench._table import claims_table, md_cell, records_table

__all__ = [
    "SCHEMA_VERSION",
    "BenchRecord",
    "Claim",
    "ResultRow",
    "bench_parser",
    "claims_table",
    "environment",
    "finish",
    "load_record",
    "md_cell",
    "plot_results",
    "records_table",
    "save_record",
    "set_threads",
    "validate_record",
    "write_readme_block",
]
