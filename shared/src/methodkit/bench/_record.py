"""The JSON record a benchmark writes: one schema for every package, validated on load."""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from pathlib import Path
from typing import Any

import numpy as np

SCHEMA_VERSION = 1

_REQUIRED = {
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
    "claim": dict,
}
_ROW_REQUIRED = {
    "method": str,
    "metric": str,
    "mean": (int, float),
    "std": (int, float),
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


@dataclass(frozen=True)
class Claim:
    """A claim a benchmark checks: its text, whether it held, and the measured value(s)."""

    text: str
    passed: bool
    measured: str = ""


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


@dataclass
class BenchRecord:
    """Everything one benchmark run reports; serialised by :func:`save_record`.

    ``claim`` is the headline claim; ``claims`` lists every claim checked (the headline
    included), each with its measured value, for the repository report.
    """

    package: str
    benchmark: str
    config: dict[str, Any]
    seeds: list[int]
    results: list[ResultRow]
    claim: Claim
    wall_time_s: float
    claims: list[Claim] = field(default_factory=list)
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
        if not self.command:
            self.command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
        if not self.created_utc:
            now = _dt.datetime.now(_dt.UTC).replace(microsecond=0)
            self.created_utc = now.isoformat().replace("+00:00", "Z")
        if not self.git_commit:
            self.git_commit = _git_commit()
        if not self.environment:
            self.environment = environment()
        if not self.claims:
            self.claims = [self.claim]

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-ready dictionary (optional empty fields dropped from rows)."""
        data = asdict(self)
        data["results"] = [
            {k: v for k, v in row.items() if v is not None} for row in data["results"]
        ]
        return data


def validate_record(data: Mapping[str, Any]) -> None:
    """Check a loaded record against schema 1.

    Raises:
        ValueError: Naming the first missing or ill-typed field.
    """
    for key, typ in _REQUIRED.items():
        if key not in data:
            raise ValueError(f"benchmark record lacks field {key!r}")
        if not isinstance(data[key], typ) or isinstance(data[key], bool):
            raise ValueError(f"field {key!r} has type {type(data[key]).__name__}")
    if data["schema"] != SCHEMA_VERSION:
        raise ValueError(f"schema {data['schema']} is not {SCHEMA_VERSION}")
    if not data["results"]:
        raise ValueError("benchmark record has no results")
    for i, row in enumerate(data["results"]):
        for key, typ in _ROW_REQUIRED.items():
            if key not in row or not isinstance(row[key], typ) or isinstance(row[key], bool):
                raise ValueError(f"results[{i}] lacks a valid {key!r}")
        if not math.isfinite(row["std"]):
            raise ValueError(f"results[{i}] has a non-finite std")
    for claim in [data["claim"], *data.get("claims", [])]:
        if not isinstance(claim.get("text"), str) or not isinstance(claim.get("passed"), bool):
            raise ValueError(f"claim {claim!r} needs a str 'text' and a bool 'passed'")


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
