"""The benchmark protocol: which training runs, in one pool, cached, and what is read off them.

All three records rest on one set of training runs (N <= 4 for ``addition_accuracy``, N = 15
for ``addition_n15``, whose epoch times ``scaling`` reuses), so :func:`training_runs` runs them
once per invocation and keeps finished runs in ``<out>/scratch_runs.jsonl`` (git-ignored): an
interrupted full run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from methodkit.bench import ResultRow

ENGINES = ["em_dp", "exact_gradient", "em_bp", "em_rejection", "em_abc", "hardem_dp"]
EPOCHS = {1: 10, 2: 10, 4: 10, 15: 8}
BIG_SAMPLER_EPOCHS = 3
CORE = ("em_dp", "exact_gradient", "supervised")

Run = dict[str, Any]
Task = tuple[str, int, int, int, int, int, int]


@dataclass(frozen=True)
class Setting:
    """The configuration a run of the script implies (full or ``--quick``)."""

    quick: bool
    seeds: tuple[int, ...]
    engine_seeds: int
    workers: int
    threads: int
    out: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Setting:
        engine_seeds = len(args.seeds) if args.engine_seeds is None else args.engine_seeds
        return cls(
            args.quick, tuple(args.seeds), engine_seeds, args.workers, args.threads, args.out
        )

    @property
    def n_train(self) -> int:
        return 600 if self.quick else 3000

    @property
    def n_test(self) -> int:
        return 300 if self.quick else 1000

    @property
    def ns(self) -> list[int]:
        return [1, 2] if self.quick else [1, 2, 4]

    @property
    def big_n(self) -> int:
        return 4 if self.quick else 15

    @property
    def big_seeds(self) -> list[int]:
        return list(self.seeds[:1]) if self.quick else list(range(5))

    def epochs(self, n: int) -> int:
        return 2 if self.quick else EPOCHS[n]

    def tasks(self) -> list[Task]:
        """Every training run, longest first (so the pool finishes together)."""
        seeds, big_n, big_seeds = list(self.seeds), self.big_n, self.big_seeds
        tasks: list[Task] = []
        for n in self.ns:
            methods = [*ENGINES, "supervised"] + (["em_enumeration"] if n <= 2 else [])
            tasks += [
                (m, n, s, self.epochs(n), self.n_train, self.n_test, self.threads)
                for m in methods
                for s in (seeds if m in CORE else seeds[: self.engine_seeds])
            ]
        big_epochs = 1 if self.quick else self.epochs(big_n)
        tasks += [
            (m, big_n, s, big_epochs, self.n_train, self.n_test, self.threads)
            for m in ("em_dp", "exact_gradient")
            for s in big_seeds
        ]
        # CPU budget: the two samplers at N = 15 run BIG_SAMPLER_EPOCHS epochs (their acceptance
        # collapses at once); BP and hard EM run the full schedule
        for m in ENGINES[2:]:
            ep = (
                1
                if self.quick
                else (BIG_SAMPLER_EPOCHS if m in ("em_rejection", "em_abc") else big_epochs)
            )
            tasks.append((m, big_n, big_seeds[0], ep, self.n_train, self.n_test, self.threads))
        cost = {"em_rejection": 3, "em_abc": 3, "em_bp": 3}
        return sorted(tasks, key=lambda t: -(t[1] * t[3] * cost.get(t[0], 1)))


def _task(task: Task) -> Run:
    method, n, seed, epochs, n_train, n_test, threads = task
    import torch

    torch.set_num_threads(threads)
    from tasks import train_addition

    warnings.simplefilter("ignore")  # all-invalid batches of collapsed samplers are expected
    t0 = time.perf_counter()
    out = train_addition(method, n, seed, epochs, n_train=n_train, n_test=n_test)
    out["wall_s"] = time.perf_counter() - t0
    return {k: (None if isinstance(v, float) and v != v else v) for k, v in out.items()}


def _run_all(tasks: list[Task], workers: int, cache: Path | None) -> list[Run]:
    """Run the training tasks; finished runs are appended to ``cache`` (JSON lines) and reused
    when the script is restarted with the same configuration."""
    done: dict[str, Run] = {}
    if cache is not None and cache.is_file():
        for line in cache.read_text().splitlines():
            rec = json.loads(line)
            done[rec["key"]] = rec["run"]
    todo = [t for t in tasks if json.dumps(t) not in done]
    print(f"{len(tasks) - len(todo)} cached runs, {len(todo)} to go", file=sys.stderr, flush=True)

    def keep(t: Task, run: Run) -> None:
        done[json.dumps(t)] = run
        print(f"done {t[:4]} in {run['wall_s']:.0f} s", file=sys.stderr, flush=True)
        if cache is not None:
            with cache.open("a") as fh:
                fh.write(json.dumps({"key": json.dumps(t), "run": run}) + "\n")

    if workers <= 1:
        for t in todo:
            keep(t, _task(t))
    else:
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            for t, run in zip(todo, pool.map(_task, todo), strict=True):
                keep(t, run)
    return [done[json.dumps(t)] for t in tasks]


_RUNS: dict[Setting, tuple[list[Run], float]] = {}


def training_runs(setting: Setting) -> tuple[list[Run], float]:
    """All training runs of ``setting`` and the seconds they took (once per invocation)."""
    if setting not in _RUNS:
        out = Path(setting.out)
        out.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        cache = None if setting.quick else out / "scratch_runs.jsonl"
        runs = _run_all(setting.tasks(), setting.workers, cache)
        _RUNS[setting] = runs, time.perf_counter() - t0
    return _RUNS[setting]


def result_rows(runs: list[Run], methods: list[str], ns: list[int]) -> list[ResultRow]:
    """Accuracy, epoch time, and (for the EM variants) invalid fraction and acceptance rate."""
    rows = []
    for n in ns:
        for m in methods:
            sel = [r for r in runs if r["method"] == m and r["n_digits"] == n]
            if not sel:
                continue
            name = f"{m}@N={n}"
            metrics = [
                ("sum_accuracy", "sum_accuracy", True),
                ("digit_accuracy", "digit_accuracy", True),
                ("epoch_time_s", "epoch_time", False),
            ]
            if m.startswith("em") or m.startswith("hard"):
                metrics.append(("invalid_frac", "invalid_frac", False))
            if m in ("em_rejection", "em_abc"):
                metrics.append(("acceptance_rate", "acceptance_rate", True))
            rows += [
                ResultRow.from_values(name, metric, [r[key] for r in sel], hib)
                for metric, key, hib in metrics
            ]
    return rows


def mean(runs: list[Run], m: str, n: int, key: str) -> float:
    vals = [r[key] for r in runs if r["method"] == m and r["n_digits"] == n and r[key] is not None]
    return sum(vals) / len(vals) if vals else float("nan")


def paired(runs: list[Run], method: str, n: int) -> tuple[float, float]:
    """Mean sum accuracy of ``method`` and of em_dp over the seeds both were run on."""
    seeds = {r["seed"] for r in runs if r["method"] == method and r["n_digits"] == n}
    sel = [r for r in runs if r["n_digits"] == n and r["seed"] in seeds]
    return mean(sel, method, n, "sum_accuracy"), mean(sel, "em_dp", n, "sum_accuracy")


def equivalence(runs: list[Run], ns: list[int]) -> tuple[float, int, bool]:
    """Largest per-seed |sum accuracy| gap between em_dp and its exact-gradient twin.

    Returns:
        The gap (NaN without pairs), the number of pairs, and whether every pair sits at zero
        accuracy on both sides (a gap of 0 there tells nothing).
    """
    diffs, at_floor = [], []
    for r in runs:
        if r["method"] != "em_dp" or r["n_digits"] not in ns:
            continue
        twin = [
            q
            for q in runs
            if q["method"] == "exact_gradient"
            and q["n_digits"] == r["n_digits"]
            and q["seed"] == r["seed"]
        ]
        if twin:
            diffs.append(abs(r["sum_accuracy"] - twin[0]["sum_accuracy"]))
            at_floor.append(r["sum_accuracy"] == twin[0]["sum_accuracy"] == 0)
    return (max(diffs) if diffs else float("nan")), len(diffs), bool(at_floor) and all(at_floor)


def epoch_times(n: int, reps: int, n_train: int) -> dict[str, list[float]]:
    """Interleaved one-epoch timings of EM-exact and the exact gradient in this process."""
    from tasks import train_addition

    from em_nesy import load_digit_images

    splits = load_digit_images()
    out: dict[str, list[float]] = {"em_dp": [], "exact_gradient": []}
    for rep in range(reps):
        for m in out:
            run = train_addition(m, n, rep, 1, n_train=n_train, n_test=10, splits=splits)
            out[m].append(run["epoch_time"])
    return out


def grad_check(ns: list[int]) -> float:
    """Max |grad EM - grad exact| of the MLP weights at initialisation (float64)."""
    import numpy as np
    import torch

    from em_nesy import AdditionDP, DigitMLP, MultiDigitAddition, e_step, em_loss, nesy_nll

    worst = 0.0
    for n in ns:
        program = MultiDigitAddition(n)
        with torch.random.fork_rng():
            torch.manual_seed(n)
            model = DigitMLP().double()
            x = torch.rand(32, 2 * n, 8, 8, dtype=torch.float64)
        y = torch.from_numpy(
            program.sum_digits(np.random.default_rng(n).integers(0, 10, (32, 2 * n)))
        )
        logits = model(x)
        em_loss(logits, e_step(logits, y, AdditionDP(program))).backward()
        g1 = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        nesy_nll(model(x), y, program).backward()
        worst = max(
            worst,
            max(
                float((a - p.grad).abs().max())
                for a, p in zip(g1, model.parameters(), strict=False)
            ),
        )
    return worst


def linear_r2(ns: list[int], ts: list[float]) -> float:
    """R^2 of a least-squares line through ``(ns, ts)``."""
    import numpy as np

    x, y = np.asarray(ns, float), np.asarray(ts, float)
    A = np.stack([np.ones_like(x), x], 1)
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    resid = y - A @ coef
    return float(1 - (resid**2).sum() / ((y - y.mean()) ** 2).sum())
