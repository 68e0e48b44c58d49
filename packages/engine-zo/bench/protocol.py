"""The forward-passes-to-target protocol: methods, lr grids, best-lr medians, rows and claims."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from zo_target import forward_passes_to_target

from engine_zo import LOZO, Engine, HiZOO, MeZO, SubZero, ZOAdam
from methodkit.bench import Claim, ResultRow, check, compare

EPS = 1e-3
METHODS: dict[str, Callable[..., Any]] = {
    "MeZO": lambda p, lr, s: MeZO(p, lr=lr, eps=EPS, seed=s),
    "LOZO": lambda p, lr, s: LOZO(p, lr=lr, eps=EPS, rank=4, lazy_interval=50, seed=s),
    "SubZero": lambda p, lr, s: SubZero(p, lr=lr, eps=EPS, rank=4, refresh_interval=100, seed=s),
    "HiZOO": lambda p, lr, s: HiZOO(p, lr=lr, eps=EPS, seed=s),
    "ZO-Adam": lambda p, lr, s: ZOAdam(p, lr=lr, eps=EPS, seed=s),
    "ENGINE": lambda p, lr, s: Engine(p, lr=lr, eps=EPS, seed=s),
    "ENGINE(inject=0)": lambda p, lr, s: Engine(p, lr=lr, eps=EPS, inject=0.0, seed=s),
}
COMPARED = list(METHODS)  # the methods of tasks A and B; the ablation's variants follow
TUNED_BASELINES = ("MeZO", "LOZO", "SubZero")
ABLATION = {
    "default r=(4,) nu=(8,) pre=1 post=1 g=0.5": {},
    "inject 0.25": {"inject": 0.25},
    "inject 0.75": {"inject": 0.75},
    "rank (2,)": {"ranks": (2,)},
    "rank (8,)": {"ranks": (8,)},
    "ranks (8,4) nu=(4,4)": {"ranks": (8, 4), "coarse_steps": (4, 4)},
    "nu=(4,) (shorter cycle)": {"coarse_steps": (4,)},
    "nu=(16,) (longer cycle)": {"coarse_steps": (16,)},
}
for _label, _kw in ABLATION.items():
    METHODS[f"ENGINE {_label}"] = lambda p, lr, s, kw=_kw: Engine(p, lr=lr, eps=EPS, seed=s, **kw)

Results = dict[str, dict[float, list[dict]]]


def log(msg: str) -> None:
    print(msg, flush=True)


def fmt(x: float | None) -> str:
    return "—" if x is None else f"{x:.0f}"


_TASK = None  # the task of the running benchmark; forked workers inherit it


def _one_run(job: tuple) -> dict:
    name, lr, seed, budget, eval_every = job
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    res = forward_passes_to_target(
        lambda p: METHODS[name](p, lr, seed),
        _TASK.model_fn,
        _TASK.loss_fn,
        _TASK.target,
        budget,
        eval_every,
    )
    return {
        "fwd": res.forward_passes,
        "final_loss": res.final_loss,
        "seconds": time.perf_counter() - t0,
        "diverged": res.diverged,
        "curve": res.curve,
    }


def run_task(
    task: Any,
    lrs: Sequence[float],
    methods: Sequence[str],
    seeds: Sequence[int],
    budget: int,
    eval_every: int,
    workers: int = 1,
) -> Results:
    """Every (method, lr, seed) run; returns {method: {lr: [run dicts]}}.

    Runs are independent single-threaded processes when ``workers > 1`` (fork)."""
    global _TASK
    _TASK = task
    jobs = [(m, lr, s, budget, eval_every) for m in methods for lr in lrs for s in seeds]
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            flat = pool.map(_one_run, jobs, chunksize=1)
    else:
        flat = [_one_run(j) for j in jobs]
    out: Results = {}
    it = iter(flat)
    for name in methods:
        out[name] = {}
        for lr in lrs:
            runs = [next(it) for _ in seeds]
            out[name][lr] = runs
            log(
                f"  {task.name} {name:18s} lr={lr:<7g} fwd={[r['fwd'] for r in runs]} "
                f"t={sum(r['seconds'] for r in runs):.1f}s"
            )
    return out


def median_fwd(runs: list[dict]) -> float | None:
    """Median forward passes over seeds; a run that missed the target counts as +inf."""
    vals = sorted(r["fwd"] if r["fwd"] is not None else float("inf") for r in runs)
    n = len(vals)
    med = vals[n // 2] if n % 2 else 0.5 * (vals[n // 2 - 1] + vals[n // 2])
    return None if med == float("inf") else med


def best_lr(per_lr: dict) -> tuple[float, float | None]:
    """The lr with the smallest median forward passes (ties: lower mean final loss)."""

    def key(lr: float) -> tuple[float, float]:
        med = median_fwd(per_lr[lr])
        loss = sum(r["final_loss"] for r in per_lr[lr]) / len(per_lr[lr])
        return (float("inf") if med is None else med, loss)

    lr = min(per_lr, key=key)
    return lr, median_fwd(per_lr[lr])


def best_baseline(res: Results) -> float | None:
    """The smallest best-lr median of the tuned baselines (None if all missed)."""
    fwd = [best_lr(res[b])[1] for b in TUNED_BASELINES if b in res]
    fwd = [f for f in fwd if f is not None]
    return min(fwd) if fwd else None


def rows_for(results: Results, budget: int) -> list[ResultRow]:
    rows = []
    for name, per_lr in results.items():
        for lr, runs in per_lr.items():
            label = f"{name} lr={lr:g}"
            fwd = [r["fwd"] if r["fwd"] is not None else budget for r in runs]
            rows.append(
                ResultRow.from_values(label, "fwd_to_target (budget if missed)", fwd, False)
            )
            rows.append(
                ResultRow.from_values(label, "final_loss", [r["final_loss"] for r in runs], False)
            )
            rows.append(
                ResultRow.from_values(label, "seconds", [r["seconds"] for r in runs], False)
            )
        lr, _ = best_lr(per_lr)
        fwd = [r["fwd"] if r["fwd"] is not None else budget for r in per_lr[lr]]
        rows.append(ResultRow.from_values(name, "fwd_at_best_lr", fwd, False))
    return rows


def ratio_text(results: Results, method: str = "ENGINE") -> str:
    """'ENGINE/X = r (lr_E vs lr_X)' for every other method, from median forward passes."""
    lr_e, fwd_e = best_lr(results[method])
    parts = []
    for name, per_lr in results.items():
        if name == method:
            continue
        lr_b, fwd_b = best_lr(per_lr)
        ratio = "n/a (target missed)" if fwd_e is None or fwd_b is None else f"{fwd_e / fwd_b:.2f}"
        parts.append(f"{method}/{name} = {ratio} ({fmt(fwd_e)}@{lr_e:g} vs {fmt(fwd_b)}@{lr_b:g})")
    return "; ".join(parts)


def ratio_rows(results: Results, method: str = "ENGINE") -> list[ResultRow]:
    rows = []
    _, fwd_e = best_lr(results[method])
    for name, per_lr in results.items():
        _, fwd_b = best_lr(per_lr)
        if name != method and fwd_e is not None and fwd_b is not None:
            rows.append(
                ResultRow.from_values(f"{method}/{name}", "fwd_ratio_best_lr", [fwd_e / fwd_b])
            )
    return rows


def print_table(task: Any, results: Results, budget: int) -> None:
    log(
        f"\n### {task.name}: median forward passes to loss <= {task.target:.4f} "
        f"(budget {budget}; — = missed)"
    )
    log("| method | lr | median fwd | per seed | final loss | seconds |")
    log("|---|---|---|---|---|---|")
    for name, per_lr in results.items():
        for lr, runs in per_lr.items():
            seeds = ", ".join(fmt(r["fwd"]) for r in runs)
            loss = sum(r["final_loss"] for r in runs) / len(runs)
            sec = sum(r["seconds"] for r in runs) / len(runs)
            log(f"| {name} | {lr:g} | {fmt(median_fwd(runs))} | {seeds} | {loss:.4f} | {sec:.1f} |")


def claim_le(
    text: str, a: float | None, b: float | None, factor: float, budget: int, extra: str = ""
) -> Claim:
    """a <= factor * b, built with check/compare.

    A reference that missed the target counts as its budget (a lower bound on its true
    count, so a pass stays a pass); ENGINE missing it is a failure; both missing it is "not
    measured" (nothing was counted), as are both counts at 0.
    """
    if a is None:
        return check(
            text,
            False,
            f"ENGINE missed the target (reference {fmt(b)}){extra}",
            inputs=[budget, budget if b is None else b],
            degenerate=b is None,
        )
    ref = budget if b is None else b
    note = f" (reference missed: > {budget})" if b is None else ""
    return compare(
        text,
        a,
        "<=",
        ref,
        scale=factor,
        measured=f"{a:.0f} vs {factor} x {ref:.0f} = {factor * ref:.0f}{note}{extra}",
    )


def adamw_steps_to_target(task: Any, lrs: Sequence[float] = (1e-3, 1e-2)) -> list[tuple]:
    """First-order ceiling: AdamW steps (1 forward + 1 backward each) to the task's target."""
    out = []
    for lr in lrs:
        model = task.model_fn()
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
        steps = None
        for k in range(1, 2001):
            opt.zero_grad()
            loss = task.loss_fn(model)
            loss.backward()
            opt.step()
            if float(loss) <= task.target:
                steps = k
                break
        out.append((lr, steps))
    return out


def curves_plot(results: Results, title: str) -> Callable[[dict, Path], None]:
    """An extra plot for run_suite: the seed-0 loss curve of every method at its best lr."""

    def plot(record: dict, path: Path) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.6))
        for name, per_lr in results.items():
            lr, _ = best_lr(per_lr)
            xs, ys = zip(*per_lr[lr][0]["curve"], strict=True)
            ax.plot(xs, ys, label=f"{name} (lr {lr:g})", lw=1.2)
        ax.set_xlabel("forward passes")
        ax.set_ylabel("training loss")
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(path, dpi=150)
        plt.close(fig)

    return plot
