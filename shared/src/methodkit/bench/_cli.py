"""The command-line options every ``bench/run.py`` shares, and the thread limit."""

from __future__ import annotations

import argparse
import os
import sys


def bench_parser(description: str, default_out: str = "bench/results") -> argparse.ArgumentParser:
    """Return a parser with the standard ``--out --seeds --quick --threads`` options.

    A script adds its own options to the returned parser before parsing.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", default=default_out, help="output folder for JSON and PNG")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds to run")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny smoke configuration (< 60 s); its claims are not the full-scale verdicts",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch/BLAS threads (default 1)")
    return parser


def set_threads(threads: int) -> None:
    """Limit BLAS and (if imported) torch to ``threads`` threads.

    The environment variables only take effect for libraries imported afterwards, so call
    this at the top of a script, before importing numpy-heavy or torch modules.

    Raises:
        ValueError: If ``threads`` < 1.
    """
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(threads)
