"""Every ``bench/run.py --quick`` runs and writes valid records with plots.

This is the one place the quick benchmarks run in CI; packages need not repeat it.
"""

import subprocess
import sys

import pytest

from methodkit.bench import load_record


@pytest.mark.slow
def test_quick_benchmark_writes_valid_records(package, tmp_path):
    out = tmp_path / "results"
    subprocess.run(
        [sys.executable, "bench/run.py", "--quick", "--seeds", "0", "--out", str(out)],
        cwd=package.dir,
        check=True,
        timeout=300,
    )
    paths = sorted(out.glob("*.json"))
    assert paths, "the quick benchmark wrote no record"
    for path in paths:
        record = load_record(path)
        assert record["package"] == package.dist
        assert (out / f"{path.stem}.png").is_file(), f"no plot for {path.name}"


def test_committed_results_are_valid(package):
    """Records committed from full runs (if any) pass the schema and have their plot."""
    results = package.dir / "bench" / "results"
    for path in sorted(results.glob("*.json")) if results.is_dir() else []:
        record = load_record(path)
        assert record["package"] == package.dist
        assert path.with_suffix(".png").is_file()
