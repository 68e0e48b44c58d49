"""Every ``bench/run.py --quick`` runs and writes valid records with plots.

This is the one place the quick benchmarks run in CI; packages need not repeat it. They start
in the background when collection ends (tests/quick_benchmarks.py), so they overlap the unit
tests on the second core.
"""

import pytest

from methodkit.bench import load_record


@pytest.mark.slow
def test_quick_benchmark_writes_valid_records(package, quick_benchmark_run):
    run = quick_benchmark_run
    assert run.returncode == 0, f"bench/run.py --quick exited {run.returncode}:\n{run.output_tail}"
    paths = sorted(run.out_dir.glob("*.json"))
    assert paths, "the quick benchmark wrote no record"
    for path in paths:
        record = load_record(path)
        assert record["package"] == package.dist
        assert (run.out_dir / f"{path.stem}.png").is_file(), f"no plot for {path.name}"


def test_committed_results_are_valid(package):
    """Records committed from full runs (if any) pass the schema and have their plot."""
    results = package.dir / "bench" / "results"
    for path in sorted(results.glob("*.json")) if results.is_dir() else []:
        record = load_record(path)
        assert record["package"] == package.dist
        assert path.with_suffix(".png").is_file()
