"""Run the selected ``bench/run.py --quick`` smoke runs on a spare core while other tests run.

``make test-all`` is one pytest process on one core (its threads are pinned to 1), and the
quick benchmarks are independent subprocesses. Started once collection is done, they run one
after another in a background thread, so on the two-core CI machine they overlap the unit tests
instead of adding their wall time to the end. ``QUICK_BENCH_WORKERS`` sets how many run at once
(default 1; 0 runs each inside its own test, serially, as before).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 300


@dataclass(frozen=True)
class QuickRun:
    """What one quick benchmark left: its exit status, output tail, wall time and records."""

    dist: str
    returncode: int | None  # None: killed at the timeout
    output_tail: str
    wall_s: float
    out_dir: Path


def run_quick_benchmark(dist: str, package_dir: Path, out_dir: Path) -> QuickRun:
    """``bench/run.py --quick --seeds 0`` of one package, records written to ``out_dir``."""
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "bench/run.py", "--quick", "--seeds", "0", "--out", str(out_dir)],
            cwd=package_dir,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        code, output = None, f"killed after {TIMEOUT_S} s\n{exc.stdout or ''}{exc.stderr or ''}"
    return QuickRun(dist, code, output[-4000:], time.perf_counter() - start, out_dir)


class QuickBenchmarks:
    """Schedules the quick benchmarks of the collected packages; tests wait for their own."""

    def __init__(self) -> None:
        self._futures: dict[str, Future[QuickRun]] = {}
        self._pool: ThreadPoolExecutor | None = None
        self._scratch: tempfile.TemporaryDirectory[str] | None = None

    def start(self, packages: list[tuple[str, Path]]) -> None:
        """Queue every given (dist, folder) pair unless workers are set to 0."""
        workers = int(os.environ.get("QUICK_BENCH_WORKERS", "1"))
        if workers <= 0 or not packages:
            return
        self._scratch = tempfile.TemporaryDirectory(prefix="quick-bench-")
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="quick-bench")
        for dist, package_dir in packages:
            out = Path(self._scratch.name) / dist
            self._futures[dist] = self._pool.submit(run_quick_benchmark, dist, package_dir, out)

    def result(self, dist: str, package_dir: Path, fallback_out: Path) -> QuickRun:
        """The package's run: the queued one if there is one, else run now into ``fallback_out``."""
        future = self._futures.get(dist)
        if future is None:
            return run_quick_benchmark(dist, package_dir, fallback_out)
        return future.result()

    def finished(self) -> list[QuickRun]:
        """Runs that completed, slowest first (for the terminal summary)."""
        done = [f for f in self._futures.values() if f.done() and not f.cancelled()]
        runs = [f.result() for f in done if f.exception() is None]
        return sorted(runs, key=lambda run: -run.wall_s)

    def close(self) -> None:
        """Drop queued runs not yet started, wait for the running ones, remove the scratch."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._scratch is not None:
            self._scratch.cleanup()


QUICK_BENCHMARKS = QuickBenchmarks()
