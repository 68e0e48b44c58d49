"""The JSON record a benchmark writes: one schema for every package, validated on load.

Schema 2 (this one) keeps every claim in one ``claims`` list, records ``command`` without
the ``--out`` folder, and stores the machine's load average at the start and end of the run
in ``environment`` (a timing claim only means something on a quiet machine).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from pathlib import Path
from typing import Any

import numpy as np

SCHEMA_VERSION = 2

_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "schema": int,
    "package": str,
    "version": str,
    "benchmark": str,
    "created_utc": str,
    "git_commit": str,
    "command": str,
    "environment": dict,
    "config": dict,
    "seeds": list,
    "wall_time_s": (int, float),
    "results": list,
    "claims": list,
}
_ROW_REQUIRED = {
    "method": str,
    "metric": str,
    "n": int,
}


@dataclass(frozen=True)
class ResultRow:
    """One (method, metric) cell: the mean and standard deviation over ``n`` seeds."""

    method: str
    metric: str
    mean: float
    std: float
    n: int
    higher_is_better: bool | None = None
    values: list[float] | None = None

    @classmethod
    def from_values(
        cls,
        method: str,
        metric: str,
        values: Sequence[float],
        higher_is_better: bool | None = None,
    ) -> ResultRow:
        """Summarise per-seed ``values`` (sample std, ``ddof=1``; 0 for a single value).

        Raises:
            ValueError: If ``values`` is empty.
        """
        arr = np.asarray(values, dtype=np.float64)
        if arr.size == 0:
            raise ValueError(f"no values for method={method!r}, metric={metric!r}")
        std = float(arr.std(ddof=1)) if arr.size > 1 else 0.0
        return cls(
            method=method,
            metric=metric,
            mean=float(arr.mean()),
            std=std,
            n=int(arr.size),
            higher_is_better=higher_is_better,
            values=[float(v) for v in arr],
        )


#: The three verdicts a claim can have; ``passed`` is True, False or None respectively.
HELD, FAILED, NOT_MEASURED = "held", "failed", "not measured"
#: What a ``--quick`` run records for a claim that only a full run can judge.
FULL_RUN_ONLY = "full run only"


@dataclass(frozen=True)
class Claim:
    """A claim a benchmark checks: its text, its verdict and the measured value(s).

    ``passed`` is ``True`` (held), ``False`` (failed) or ``None`` (not measured: an input was
    missing, NaN or degenerate). Build claims with :func:`~methodkit.bench.check` or
    :func:`~methodkit.bench.compare`, which make that decision; ``inputs`` keeps the numbers
    the verdict rests on so that :func:`~methodkit.bench.run_suite` can re-check them.
    ``quick`` marks a claim that a ``--quick`` run can judge too; ``full_run_only`` is set by
    the runner on a quick run's other claims (their verdict is then None).
    """

    text: str
    passed: bool | None
    measured: str = ""
    inputs: tuple[float | None, ...] = ()
    quick: bool = False
    full_run_only: bool = False

    @property
    def status(self) -> str:
        """``"held"``, ``"failed"``, ``"not measured"`` or ``"full run only"``."""
        return claim_status(self.passed, self.full_run_only)


def claim_status(passed: bool | None, full_run_only: bool = False) -> str:
    """The verdict word for a claim's ``passed`` value (``True``/``False``/``None``)."""
    if passed is None and full_run_only:
        return FULL_RUN_ONLY
    return NOT_MEASURED if passed is None else (HELD if passed else FAILED)


def _finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def _git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (None where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def environment(threads: int = 1, device: str = "cpu") -> dict[str, Any]:
    """Describe the machine and library versions a run used (torch only if imported)."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": f"{platform.system()}-{platform.machine()}",
        "cpu_count": os.cpu_count(),
        "threads": threads,
        "numpy": np.__version__,
        "device": device,
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        env["torch"] = torch.__version__
    return env


def strip_out_option(command: str) -> str:
    """Drop ``--out DIR`` / ``--out=DIR`` from a command line: scratch folders are not results."""
    words = shlex.split(command)
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word == "--out":
            skip = True
            continue
        if word.startswith("--out="):
            continue
        kept.append(word)
    return shlex.join(kept)


def _command() -> str:
    return strip_out_option(shlex.join([f"bench/{Path(sys.argv[0]).name}", *sys.argv[1:]]))


@dataclass
class BenchRecord:
    """Everything one benchmark run reports; serialised by :func:`save_record`."""

    package: str
    benchmark: str
    config: dict[str, Any]
    seeds: list[int]
    results: list[ResultRow]
    claims: list[Claim]
    wall_time_s: float
    version: str = ""
    command: str = ""
    created_utc: str = ""
    git_commit: str = ""
    environment: dict[str, Any] = field(default_factory=dict)
    schema: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not self.version:
            try:
                self.version = _dist_version(self.package)
            except PackageNotFoundError:
                self.version = "unknown"
        self.command = strip_out_option(self.command) if self.command else _command()
        if not self.created_utc:
            now = _dt.datetime.now(_dt.UTC).replace(microsecond=0)
            self.created_utc = now.isoformat().replace("+00:00", "Z")
        if not self.git_commit:
            self.git_commit = _git_commit()
        if not self.environment:
            self.environment = environment()

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready dictionary (optional empty fields dropped from rows)."""
        data = asdict(self)
        data["results"] = [_row_dict(row) for row in data["results"]]
        data["claims"] = [_claim_dict(c) for c in self.claims]
        return data


def _row_dict(row: dict[str, Any]) -> dict[str, Any]:
    """A result row for JSON: a NaN or infinite mean is recorded as null ("not measured")."""
    out = {k: v for k, v in row.items() if v is not None}
    out["mean"] = _finite_or_none(row["mean"])
    out["std"] = _finite_or_none(row["std"]) if out["mean"] is not None else None
    if row.get("values") is not None:
        out["values"] = [_finite_or_none(v) for v in row["values"]]
    return out


def _claim_dict(claim: Claim) -> dict[str, Any]:
    out: dict[str, Any] = {"text": claim.text, "passed": claim.passed, "measured": claim.measured}
    if claim.inputs:
        out["inputs"] = [_finite_or_none(x) for x in claim.inputs]
    if claim.full_run_only:
        out["full_run_only"] = True
    return out


def validate_record(data: Mapping[str, Any]) -> None:
    """Check a loaded record against schema 2.

    Raises:
        ValueError: Naming the first missing or ill-typed field.
    """
    for key, typ in _REQUIRED.items():
        if key not in data:
            raise ValueError(f"benchmark record lacks field {key!r}")
        if not isinstance(data[key], typ) or isinstance(data[key], bool):
            raise ValueError(f"field {key!r} has type {type(data[key]).__name__}")
    if data["schema"] != SCHEMA_VERSION:
        raise ValueError(
            f"schema {data['schema']} is not {SCHEMA_VERSION} "
            "(python -m methodkit.bench.upgrade rewrites older records)"
        )
    if "--out" in shlex.split(data["command"]):
        raise ValueError(f"command {data['command']!r} keeps an --out folder")
    for key in ("load_avg_start", "load_avg_end"):
        if key not in data["environment"]:
            raise ValueError(f"environment lacks {key!r} (null where it was not recorded)")
    if not data["results"]:
        raise ValueError("benchmark record has no results")
    for i, row in enumerate(data["results"]):
        for key, typ in _ROW_REQUIRED.items():
            if key not in row or not isinstance(row[key], typ) or isinstance(row[key], bool):
                raise ValueError(f"results[{i}] lacks a valid {key!r}")
        _validate_row_numbers(i, row)
    if not data["claims"]:
        raise ValueError("benchmark record has no claims")
    for claim in data["claims"]:
        if not isinstance(claim.get("text"), str) or not (
            claim.get("passed") is None or isinstance(claim.get("passed"), bool)
        ):
            raise ValueError(f"claim {claim!r} needs a str 'text' and 'passed' true/false/null")


def _validate_row_numbers(i: int, row: Mapping[str, Any]) -> None:
    """``mean`` and ``std`` are finite numbers, or both null for a row that was not measured."""
    if "mean" not in row or "std" not in row:
        raise ValueError(f"results[{i}] lacks a valid 'mean' or 'std'")
    if row["mean"] is None and row["std"] is None:
        return
    for key in ("mean", "std"):
        value = row[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ValueError(f"results[{i}] lacks a valid {key!r}")
        if not math.isfinite(value):
            raise ValueError(f"results[{i}] has a non-finite {key}")


def save_record(record: BenchRecord, out_dir: str | os.PathLike[str]) -> Path:
    """Validate and write ``<out_dir>/<benchmark>.json``; return its path."""
    data = record.to_dict()
    validate_record(data)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{record.benchmark}.json"
    # allow_nan=False: a NaN mean would make the JSON unreadable by strict parsers.
    path.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
    return path


def load_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a record written by :func:`save_record`."""
    data = json.loads(Path(path).read_text())
    validate_record(data)
    return data
