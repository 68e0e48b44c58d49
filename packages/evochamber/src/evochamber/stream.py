"""Task streams from JSONL files and the answer checkers ExactMatch, NumericMatch, PythonTests."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator

from evochamber.types import Task, normalize_answer


class ExactMatch:
    """``normalize(answer) == normalize(expected)``."""

    def __init__(self, expected: str) -> None:
        self.expected = str(expected)

    def __call__(self, answer: str) -> bool:
        """Whether ``answer`` passes the check."""
        return normalize_answer(answer) == normalize_answer(self.expected)


class NumericMatch:
    """The last number in the answer equals ``expected`` within ``tol`` (relative)."""

    _NUM = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?")

    def __init__(self, expected: str | float, tol: float = 1e-6) -> None:
        self.expected = _to_float(str(expected))
        self.tol = tol

    def __call__(self, answer: str) -> bool:
        """Whether ``answer`` passes the check."""
        nums = self._NUM.findall(str(answer).replace(",", ""))
        if not nums or self.expected is None:
            return False
        got = _to_float(nums[-1])
        return got is not None and abs(got - self.expected) <= self.tol * max(
            1.0, abs(self.expected)
        )


def _to_float(s: str) -> float | None:
    try:
        if "/" in s:
            a, b = s.split("/", 1)
            return float(a) / float(b)
        return float(s)
    except (ValueError, ZeroDivisionError):
        return None


class PythonTests:
    """Runs the answer (Python source) followed by ``tests`` in a subprocess with a timeout.

    Not a sandbox: untrusted code runs with the user's rights.
    """

    def __init__(self, tests: str, timeout: float = 10.0) -> None:
        self.tests, self.timeout = tests, float(timeout)

    def __call__(self, answer: str) -> bool:
        """Whether ``answer`` passes the check."""
        code = re.sub(r"^```(?:python)?\n|```\s*$", "", str(answer).strip(), flags=re.M)
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(code + "\n\n" + self.tests + "\n")
            path = f.name
        try:
            r = subprocess.run([sys.executable, path], capture_output=True, timeout=self.timeout)
            return r.returncode == 0
        except subprocess.TimeoutExpired:
            return False
        finally:
            os.unlink(path)


class TaskStream:
    """A list of :class:`Task` built from records."""

    def __init__(self, tasks: list[Task]) -> None:
        self.tasks = list(tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)

    def __len__(self) -> int:
        return len(self.tasks)

    @classmethod
    def from_jsonl(
        cls,
        path: str | os.PathLike[str],
        niche: str = "niche",
        prompt: str = "prompt",
        answer: str | None = "answer",
        id: str | None = "id",
        checker: Callable[[str], Callable[[str], bool]] = ExactMatch,
    ) -> TaskStream:
        """One task per line; ``checker(expected)`` builds each task's check."""
        tasks = []
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f):
                if not line.strip():
                    continue
                rec = json.loads(line)
                if prompt not in rec:
                    raise ValueError(f"{path}:{i + 1} has no field {prompt!r}")
                exp = rec.get(answer) if answer else None
                tasks.append(
                    Task(
                        task_id=str(rec.get(id, i)) if id else str(i),
                        niche=rec.get(niche),
                        prompt=str(rec[prompt]),
                        check=checker(exp) if exp is not None else None,
                        meta={k: v for k, v in rec.items() if k not in (prompt,)},
                    )
                )
        return cls(tasks)
