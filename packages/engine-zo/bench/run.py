"""Forward passes to a target loss (spec tasks A and B), V-cycle ablation, peak memory.

Usage (from packages/engine-zo):  python bench/run.py [--quick] [--seeds 0 1 2] [--threads 1]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from methodkit.bench import (
    BenchRecord,
    Claim,
    ResultRow,
    bench_parser,
    environment,
    finish,
    plot_results,
    save_record,
    set_threads,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch

from engine_zo import LOZO, Engine, HiZOO, MeZO, SubZero, ZOAdam
from engine_zo.bench import forward_passes_to_target
from methodkit import zo

EPS = 1e-3
METHODS = {
    "MeZO": lambda p, lr, s: MeZO(p, lr=lr, eps=EPS, seed=s),
    "LOZO": lambda p, lr, s: LOZO(p, lr=lr, eps=EPS, rank=4, lazy_interval=50, seed=s),
    "SubZero": lambda p, lr, s: SubZero(p, lr=lr, eps=EPS, rank=4, refresh_interval=100, seed=s),
    "HiZOO": lambda p, lr, s: HiZOO(p, lr=lr, eps=EPS, seed=s),
    "ZO-Adam": lambda p, lr, s: ZOAdam(p, lr=lr, eps=EPS, seed=s),
    "ENGINE": lambda p, lr, s: Engine(p, lr=lr, eps=EPS, seed=s),
    "ENGINE(inject=0)": lambda p, lr, s: Engine(p, lr=lr, eps=EPS, inject=0.0, seed=s),
}
TUNED_BASELINES = ("MeZO", "LOZO", "SubZero")


def _fmt(x: float | None) -> str:
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
    lrs: list[float],
    methods: list[str],
    seeds: list[int],
    budget: int,
    eval_every: int,
    log: Callable[[str], None],
    workers: int = 1,
) -> dict:
    """Every (method, lr, seed) run; returns {method: {lr: [run dicts]}}.

    Runs are independent single-threaded processes when ``workers > 1`` (fork)."""
    global _TASK
    _TASK = task
    jobs = [(m, lr, s, budget, eval_every) for m in methods for lr in lrs for s in seeds]
    if workers > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(workers) as pool:
            flat = pool.map(_one_run, jobs, chunksize=1)
    else:
        flat = [_one_run(j) for j in jobs]
    out: dict[str, dict[float, list[dict]]] = {}
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


def _median_fwd(runs: list[dict], budget: int) -> float | None:
    """Median forward passes over seeds; a run that missed the target counts as +inf."""
    vals = sorted(r["fwd"] if r["fwd"] is not None else float("inf") for r in runs)
    n = len(vals)
    med = vals[n // 2] if n % 2 else 0.5 * (vals[n // 2 - 1] + vals[n // 2])
    return None if med == float("inf") else med


def best_lr(per_lr: dict, budget: int) -> tuple[float, float | None]:
    """The lr with the smallest median forward passes (ties: lower mean final loss)."""

    def key(lr: float) -> tuple[float, float]:
        med = _median_fwd(per_lr[lr], budget)
        loss = sum(r["final_loss"] for r in per_lr[lr]) / len(per_lr[lr])
        return (float("inf") if med is None else med, loss)

    lr = min(per_lr, key=key)
    return lr, _median_fwd(per_lr[lr], budget)


def rows_for(results: dict, budget: int) -> list[ResultRow]:
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
        lr, _ = best_lr(per_lr, budget)
        fwd = [r["fwd"] if r["fwd"] is not None else budget for r in per_lr[lr]]
        rows.append(ResultRow.from_values(name, "fwd_at_best_lr", fwd, False))
    return rows


def ratio_text(results: dict, budget: int, method: str = "ENGINE") -> str:
    """'ENGINE/X = r (lr_E vs lr_X)' for every other method, from median forward passes."""
    lr_e, fwd_e = best_lr(results[method], budget)
    parts = []
    for name, per_lr in results.items():
        if name == method:
            continue
        lr_b, fwd_b = best_lr(per_lr, budget)
        ratio = "n/a (target missed)" if fwd_e is None or fwd_b is None else f"{fwd_e / fwd_b:.2f}"
        parts.append(
            f"{method}/{name} = {ratio} ({_fmt(fwd_e)}@{lr_e:g} vs {_fmt(fwd_b)}@{lr_b:g})"
        )
    return "; ".join(parts)


def ratio_rows(results: dict, budget: int, method: str = "ENGINE") -> list[ResultRow]:
    rows = []
    _, fwd_e = best_lr(results[method], budget)
    for name, per_lr in results.items():
        _, fwd_b = best_lr(per_lr, budget)
        if name != method and fwd_e is not None and fwd_b is not None:
            rows.append(
                ResultRow.from_values(f"{method}/{name}", "fwd_ratio_best_lr", [fwd_e / fwd_b])
            )
    return rows


def print_table(task: Any, results: dict, budget: int, log: Callable[[str], None]) -> None:
    log(
        f"\n### {task.name}: median forward passes to loss <= {task.target:.4f} "
        f"(budget {budget}; — = missed)"
    )
    log("| method | lr | median fwd | per seed | final loss | seconds |")
    log("|---|---|---|---|---|---|")
    for name, per_lr in results.items():
        for lr, runs in per_lr.items():
            med = _median_fwd(runs, budget)
            seeds = ", ".join(_fmt(r["fwd"]) for r in runs)
            loss = sum(r["final_loss"] for r in runs) / len(runs)
            sec = sum(r["seconds"] for r in runs) / len(runs)
            log(f"| {name} | {lr:g} | {_fmt(med)} | {seeds} | {loss:.4f} | {sec:.1f} |")


def claim_le(
    text: str, a: float | None, b: float | None, factor: float, budget: int, extra: str = ""
) -> Claim:
    """a <= factor * b; a reference that missed the target counts as its budget (a lower
    bound on its true count, so a pass stays a pass); ENGINE missing it is a failure."""
    if a is None:
        return Claim(text, False, f"ENGINE missed the target (reference {_fmt(b)}){extra}")
    ref = budget if b is None else b
    note = f" (reference missed: > {budget})" if b is None else ""
    return Claim(
        text,
        bool(a <= factor * ref),
        f"{a:.0f} vs {factor} x {ref:.0f} = {factor * ref:.0f}{note}{extra}",
    )


def plot_curves(results: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, per_lr in results.items():
        lr, _ = best_lr(per_lr, 0)
        run = per_lr[lr][0]
        xs, ys = zip(*run["curve"], strict=True)
        ax.plot(xs, ys, label=f"{name} (lr {lr:g})", lw=1.2)
    ax.set_xlabel("forward passes")
    ax.set_ylabel("training loss")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


# ---------------------------------------------------------------- memory (spawned processes)
def _wide_mlp(width: int, depth: int) -> torch.nn.Module:
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers)


def memory_step(method: str, width: int, depth: int, threads: int) -> None:
    """Build the wide MLP and take two steps (ENGINE: a fine step, then a coarse step that
    injects the fine direction), all inside the measured child process."""
    torch.set_num_threads(threads)
    model = _wide_mlp(width, depth)
    x = torch.randn(32, width)

    def loss() -> torch.Tensor:
        return model(x).pow(2).mean()

    if method == "MeZO":
        opt = MeZO(model.parameters(), lr=1e-6, eps=EPS)
    else:
        opt = Engine(model.parameters(), lr=1e-6, eps=EPS, pre_smooth=1)
    opt.step(loss)
    opt.step(loss)
    assert len(opt.state) == 0


def memory_record(
    width: int, depth: int, reps: int, threads: int, log: Callable[[str], None]
) -> tuple[list[ResultRow], Claim, dict]:
    n_params = depth * (width * width + width)
    peaks = {"MeZO": [], "ENGINE": []}
    for _ in range(reps):
        for method in peaks:
            bytes_ = zo.peak_memory(memory_step, "cpu", args=(method, width, depth, threads))
            peaks[method].append(bytes_ / 2**20)
    log(
        f"  peak memory ({n_params / 1e6:.1f}M params): "
        + ", ".join(f"{k}={min(v):.1f} MiB" for k, v in peaks.items())
    )
    mezo, engine = min(peaks["MeZO"]), min(peaks["ENGINE"])
    claim = Claim(
        "(4) peak memory of one ENGINE step <= 1.05 x MeZO's + 8 MiB on a ~20M-parameter MLP, "
        "no tensor in optimizer state",
        bool(engine <= 1.05 * mezo + 8.0),
        f"ENGINE {engine:.1f} MiB vs MeZO {mezo:.1f} MiB (+{engine - mezo:.1f} MiB, "
        f"params alone {n_params * 4 / 2**20:.1f} MiB); optimizer state tensors: 0",
    )
    rows = [
        ResultRow.from_values(k, "peak_MiB_above_torch_import", v, False) for k, v in peaks.items()
    ]
    cfg = {
        "width": width,
        "depth": depth,
        "params": n_params,
        "batch": 32,
        "reps": reps,
        "steps_measured": 2,
        "measure": "methodkit.zo.peak_memory (CPU RSS, spawned process)",
    }
    return rows, claim, cfg


# ---------------------------------------------------------------- ablation
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


def run_ablation(
    task: Any,
    lrs: list[float],
    seeds: list[int],
    budget: int,
    eval_every: int,
    log: Callable[[str], None],
    workers: int,
) -> dict:
    for label, kw in ABLATION.items():
        METHODS[f"ENGINE {label}"] = lambda p, lr, s, kw=kw: Engine(p, lr=lr, eps=EPS, seed=s, **kw)
    names = [f"ENGINE {label}" for label in ABLATION]
    return run_task(task, lrs, names, seeds, budget, eval_every, log, workers)


def main() -> int:
    parser = bench_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        nargs="+",
        default=["A", "B", "ablation", "memory"],
        help="subset of benchmarks: A B ablation memory",
    )
    parser.add_argument(
        "--spec",
        action="store_true",
        help="spec protocol: task A target 0.8, budget 20,000; task B 1,024 sequences",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="independent single-threaded runs in parallel (spec: 2 cores)",
    )
    args = parser.parse_args()
    set_threads(args.threads)
    torch.set_num_threads(args.threads)
    from tasks import digits_task, sequence_task

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = environment(args.threads)
    seeds = args.seeds
    records = []

    def log(msg: str) -> None:
        print(msg, flush=True)

    if args.quick:
        cfg_a = {
            "lrs": [0.01],
            "budget": 300,
            "eval_every": 100,
            "target": 2.0,
            "methods": list(METHODS),
        }
        cfg_b = {
            "lrs": [1e-2],
            "budget": 100,
            "eval_every": 20,
            "n": 64,
            "pretrain_steps": 5,
            "adamw_steps": 5,
            "methods": ["MeZO", "ENGINE"],
        }
    else:
        cfg_a = {
            "lrs": [0.005, 0.01, 0.015, 0.02],
            "budget": 8000,
            "eval_every": 100,
            "target": 2.0,
            "methods": list(METHODS),
        }
        cfg_b = {
            "lrs": [1e-3, 3e-3, 1e-2],
            "budget": 2000,
            "eval_every": 20,
            "n": 256,
            "pretrain_steps": 200,
            "adamw_steps": 100,
            "methods": [
                "MeZO",
                "LOZO",
                "SubZero",
                "HiZOO",
                "ZO-Adam",
                "ENGINE",
                "ENGINE(inject=0)",
            ],
        }

    if args.spec and not args.quick:
        cfg_a.update(target=0.8, budget=20_000)
        cfg_b.update(n=1024, budget=20_000)

    if "A" in args.only:
        t0 = time.perf_counter()
        task = digits_task(target=cfg_a["target"])
        log(f"task A: {task.info}, target {task.target}")
        res = run_task(
            task,
            cfg_a["lrs"],
            cfg_a["methods"],
            seeds,
            cfg_a["budget"],
            cfg_a["eval_every"],
            log,
            args.workers,
        )
        # first-order ceiling: AdamW steps (1 forward + 1 backward each) to the same target
        adamw = []
        for lr in (1e-3, 1e-2):
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
            adamw.append((lr, steps))
        print_table(task, res, cfg_a["budget"], log)
        budget = cfg_a["budget"]
        rows = rows_for(res, budget) + ratio_rows(res, budget)
        for lr, steps in adamw:
            if steps is not None:
                rows.append(
                    ResultRow.from_values(
                        f"AdamW (first-order) lr={lr:g}",
                        "steps_to_target (fwd+bwd each)",
                        [steps],
                        False,
                    )
                )
        claims = []
        if "ENGINE" in res and "MeZO" in res:
            for lr in (0.005, 0.01):
                if lr in res["ENGINE"]:
                    claims.append(
                        claim_le(
                            f"(1) task A lr={lr:g}: ENGINE median fwd <= 0.75 x MeZO's",
                            _median_fwd(res["ENGINE"][lr], budget),
                            _median_fwd(res["MeZO"][lr], budget),
                            0.75,
                            budget,
                        )
                    )
            best_base = [best_lr(res[b], budget) for b in TUNED_BASELINES if b in res]
            fwd_base = [f for _, f in best_base if f is not None]
            claims.insert(
                0,
                claim_le(
                    "(2A) task A: ENGINE at its best lr <= 1.05 x the best tuned baseline "
                    "(MeZO, LOZO, SubZero)",
                    best_lr(res["ENGINE"], budget)[1],
                    min(fwd_base) if fwd_base else None,
                    1.05,
                    budget,
                    extra=f"; ratios: {ratio_text(res, budget)}",
                ),
            )
            if "ENGINE(inject=0)" in res:
                claims.append(
                    claim_le(
                        "(3) task A: ENGINE(inject=0.5) at its best lr <= 0.9 x ENGINE(inject=0)",
                        best_lr(res["ENGINE"], budget)[1],
                        best_lr(res["ENGINE(inject=0)"], budget)[1],
                        0.9,
                        budget,
                    )
                )
        cfg = {
            **cfg_a,
            "eps": EPS,
            "target": task.target,
            "task": task.info,
            "adamw_steps_to_target": {str(k): v for k, v in adamw},
            "note": "fwd counts ZO optimizer closure calls; evaluation passes not counted",
        }
        rec = BenchRecord(
            "engine-zo",
            "forward_passes_A",
            cfg,
            seeds,
            rows,
            claims[0],
            time.perf_counter() - t0,
            claims=claims,
            environment=env,
        )
        save_record(rec, out)
        plot_results(
            rec.to_dict(),
            out / "forward_passes_A.png",
            metrics=["fwd_at_best_lr"],
            units={"fwd_at_best_lr": "forward passes"},
        )
        plot_curves(res, out / "forward_passes_A_curves.png", "task A: seed-0 loss at best lr")
        records.append(rec.to_dict())

    if "B" in args.only:
        t0 = time.perf_counter()
        task = sequence_task(
            n=cfg_b["n"], pretrain_steps=cfg_b["pretrain_steps"], adamw_steps=cfg_b["adamw_steps"]
        )
        log(f"task B: {task.info}, target {task.target:.4f} ({time.perf_counter() - t0:.0f}s)")
        res = run_task(
            task,
            cfg_b["lrs"],
            cfg_b["methods"],
            seeds,
            cfg_b["budget"],
            cfg_b["eval_every"],
            log,
            args.workers,
        )
        budget = cfg_b["budget"]
        print_table(task, res, budget, log)
        best_base = [best_lr(res[b], budget)[1] for b in TUNED_BASELINES if b in res]
        fwd_base = [f for f in best_base if f is not None]
        claim = claim_le(
            "(2B) task B: ENGINE at its best lr <= 1.05 x the best tuned baseline "
            "(MeZO, LOZO, SubZero)",
            best_lr(res["ENGINE"], budget)[1],
            min(fwd_base) if fwd_base else None,
            1.05,
            budget,
            extra=f"; ratios: {ratio_text(res, budget)}",
        )
        cfg = {**cfg_b, "eps": EPS, "target": task.target, "task": task.info}
        rows = rows_for(res, budget) + ratio_rows(res, budget)
        rec = BenchRecord(
            "engine-zo",
            "forward_passes_B",
            cfg,
            seeds,
            rows,
            claim,
            time.perf_counter() - t0,
            environment=env,
        )
        save_record(rec, out)
        plot_results(
            rec.to_dict(),
            out / "forward_passes_B.png",
            metrics=["fwd_at_best_lr"],
            units={"fwd_at_best_lr": "forward passes"},
        )
        records.append(rec.to_dict())

    if "ablation" in args.only and not args.quick:
        t0 = time.perf_counter()
        task = digits_task(target=cfg_a["target"])
        lrs, budget = [0.01], cfg_a["budget"]
        res = run_ablation(task, lrs, seeds, budget, 100, log, args.workers)
        print_table(task, res, budget, log)
        rows = rows_for(res, budget)
        ranked = sorted((best_lr(v, budget)[1] or float("inf"), k) for k, v in res.items())
        default = best_lr(res[f"ENGINE {next(iter(ABLATION))}"], budget)[1]
        claim = claim_le(
            "ablation (task A, lr 0.01): the spec-default V-cycle is within 1.2x of the "
            "best configuration tried",
            default,
            None if ranked[0][0] == float("inf") else ranked[0][0],
            1.2,
            budget,
            extra=f"; best: {ranked[0][1]}",
        )
        cfg = {
            "lrs": lrs,
            "budget": budget,
            "configs": {
                k: {a: list(b) if isinstance(b, tuple) else b for a, b in v.items()}
                for k, v in ABLATION.items()
            },
            "eps": EPS,
        }
        rec = BenchRecord(
            "engine-zo",
            "engine_ablation",
            cfg,
            seeds,
            rows,
            claim,
            time.perf_counter() - t0,
            environment=env,
        )
        save_record(rec, out)
        plot_results(
            rec.to_dict(),
            out / "engine_ablation.png",
            metrics=["fwd_at_best_lr"],
            units={"fwd_at_best_lr": "forward passes"},
        )
        records.append(rec.to_dict())

    if "memory" in args.only and not args.quick:
        t0 = time.perf_counter()
        rows, claim, cfg = memory_record(1024, 19, 2, args.threads, log)
        rec = BenchRecord(
            "engine-zo",
            "peak_memory",
            cfg,
            [0],
            rows,
            claim,
            time.perf_counter() - t0,
            environment=env,
        )
        save_record(rec, out)
        plot_results(
            rec.to_dict(), out / "peak_memory.png", units={"peak_MiB_above_torch_import": "MiB"}
        )
        records.append(rec.to_dict())

    return finish(records, args.quick)


if __name__ == "__main__":
    sys.exit(main())
