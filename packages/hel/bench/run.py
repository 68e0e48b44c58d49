"""hel benchmark: gradient agreement, training equivalence, baselines, Echo Learning, memory.

Usage: python bench/run.py [--quick] [--seeds 0 1 2] [--out bench/results] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import methodkit
from methodkit.bench import (
    BenchRecord,
    Claim,
    ResultRow,
    bench_parser,
    finish,
    plot_results,
    save_record,
    set_threads,
)

MEMORY_SCRIPT = r"""
import json, sys, torch
torch.set_num_threads(1)
from hel import BPTT, EchoRNN, HamiltonianEcho, HopfieldOscillatorCell
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024  # kB -> MB
kind, T = sys.argv[1], int(sys.argv[2])
g = torch.Generator().manual_seed(0)
model = EchoRNN(HopfieldOscillatorCell(1, 32, generator=g), 4)
x = torch.randn(8, T, 1, generator=g); y = torch.randint(0, 4, (8,), generator=g)
loss = torch.nn.CrossEntropyLoss()
est = {"bptt": BPTT(model, loss), "hel_two_pass": HamiltonianEcho(model, loss, mode="two_pass"),
       "hel_centered": HamiltonianEcho(model, loss)}[kind]
est.backward(x[:, :5], y)  # warm-up: allocator, lazy imports
with open("/proc/self/clear_refs", "w") as f:  # reset the peak-RSS high-water mark (VmHWM)
    f.write("5")
base = status("VmRSS:")
est.backward(x, y)
print(json.dumps({"base_mb": base, "peak_mb": status("VmHWM:")}))
"""


def make_estimator(name: str, model: Any, loss: Any, T: int) -> Any:
    from hel import BPTT, EchoLearning, EProp, FrozenRecurrence, HamiltonianEcho, TruncatedBPTT

    if name == "bptt":
        return BPTT(model, loss)
    if name == "hel":
        return HamiltonianEcho(model, loss, mode="centered")
    if name == "hel_two_pass":
        return HamiltonianEcho(model, loss, mode="two_pass")
    if name == "tbptt_k10":
        return TruncatedBPTT(model, loss, k=10)
    if name == "tbptt_T/8":
        return TruncatedBPTT(model, loss, k=max(1, T // 8))
    if name == "eprop_sym":
        return EProp(model, loss, feedback="symmetric")
    if name == "eprop_random":
        return EProp(model, loss, feedback="random")
    if name == "frozen":
        return FrozenRecurrence(model, loss)
    if name.startswith("el"):
        return EchoLearning(
            model, loss, homeostasis=float(name.split("=")[1]) if "=" in name else 0.0
        )
    raise ValueError(name)


def build_model(
    seed: int, m: int, out: int, n: int, dt: float, readout: str, cell: str = "hopfield"
) -> Any:
    import torch

    from hel import EchoRNN, HopfieldOscillatorCell, RateEchoCell

    g = torch.Generator().manual_seed(seed)
    c = (HopfieldOscillatorCell if cell == "hopfield" else RateEchoCell)(m, n, dt=dt, generator=g)
    model = EchoRNN(c, out, readout=readout)
    with torch.no_grad():
        model.head.weight.uniform_(-1, 1, generator=g).mul_(n**-0.5)
        model.head.bias.zero_()
    return model


def train(
    method: str,
    data: tuple,
    cfg: dict,
    seed: int,
    probe: tuple | None = None,
    cell: str = "hopfield",
) -> dict[str, Any]:
    """Train one model; returns metrics and (optionally) per-epoch gradient cosines."""
    import torch

    from hel import compare_estimators

    Xtr, ytr, Xte, yte, task = data
    m = Xtr.shape[2]
    out = int(ytr.max()) + 1 if task == "clf" else ytr.shape[2]
    readout = "mean" if task == "clf" else "sequence"
    model = build_model(seed, m, out, cfg["n"], cfg["dt"], readout, cell)
    loss = torch.nn.CrossEntropyLoss() if task == "clf" else torch.nn.MSELoss()
    T = Xtr.shape[1]
    est = make_estimator(method, model, loss, T)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    gen = torch.Generator().manual_seed(1000 + seed)
    n = Xtr.shape[0]
    bs = cfg["batch"] if cfg["batch"] else n
    cosines = []
    t0 = time.perf_counter()
    for _ in range(cfg["epochs"]):
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n, bs):
            idx = perm[i : i + bs]
            opt.zero_grad()
            est.backward(Xtr[idx], ytr[idx])
            opt.step()
        if probe is not None:
            xp, yp, probe_ests = probe
            ests = {k: make_estimator(k, model, loss, T) for k in probe_ests}
            res = compare_estimators(model, (xp, yp), loss, ests)
            cosines.append({k: v["cosine"] for k, v in res.items()})
    wall = time.perf_counter() - t0
    with torch.no_grad():
        pred = model(Xte)
        if task == "clf":
            metric = float((pred.argmax(1) == yte).float().mean())
        else:
            metric = float(((pred - yte) ** 2).mean() / yte.var())
    return {"metric": metric, "wall": wall, "cosines": cosines, "model": model, "loss": loss}


def to_t(*arrs: np.ndarray) -> list[Any]:
    import torch

    return [torch.from_numpy(np.ascontiguousarray(a)) for a in arrs]


def load_task(name: str, quick: bool) -> tuple:
    from hel import delayed_recall, load_aeon, sequential_digits

    if name == "sequential_digits":
        Xtr, Xte, ytr, yte = sequential_digits()
        if quick:
            Xtr, ytr, Xte, yte = Xtr[:256], ytr[:256], Xte[:200], yte[:200]
        return (*to_t(Xtr, ytr, Xte, yte), "clf")
    if name in ("gunpoint", "basic_motions"):
        Xtr, ytr = load_aeon(name, "train")
        Xte, yte = load_aeon(name, "test")
        return (*to_t(Xtr, ytr, Xte, yte), "clf")
    if name == "delayed_recall":
        ntr, nte = (128, 64) if quick else (CONFIG["delayed_recall"]["n_train"], 500)
        u, y = delayed_recall(ntr + nte, T=100, delay=20, random_state=0)
        return (*to_t(u[:ntr], y[:ntr], u[ntr:], y[ntr:]), "reg")
    raise ValueError(name)


CONFIG = {
    "sequential_digits": {
        "n": 64,
        "dt": 0.2,
        "lr": 3e-3,
        "batch": 64,
        "epochs": 16,
        "methods": ["bptt", "hel", "tbptt_k10", "eprop_sym", "frozen"],
    },
    "gunpoint": {
        "n": 64,
        "dt": 0.2,
        "lr": 1e-2,
        "batch": 0,
        "epochs": 40,
        "methods": ["bptt", "hel", "tbptt_k10", "tbptt_T/8", "eprop_sym", "frozen"],
    },
    "basic_motions": {
        "n": 64,
        "dt": 0.2,
        "lr": 1e-2,
        "batch": 0,
        "epochs": 40,
        "methods": ["bptt", "hel", "tbptt_k10", "eprop_sym", "frozen"],
    },
    "delayed_recall": {
        "n": 64,
        "dt": 0.2,
        "lr": 3e-3,
        "batch": 64,
        "epochs": 6,
        "n_train": 384,
        "methods": ["bptt", "hel", "tbptt_k10", "eprop_sym", "frozen"],
    },
    "echo_learning": {
        "n": 64,
        "dt": 0.2,
        "lr": 3e-3,
        "batch": 64,
        "epochs": 8,
        "n_train": 512,
        "methods": ["bptt", "el", "el=0.001", "el=0.01", "el=0.1"],
    },
}
QUICK = {
    "sequential_digits": {"epochs": 1, "methods": ["bptt", "hel", "eprop_sym"]},
    "gunpoint": {"epochs": 3, "methods": ["bptt", "hel"]},
}


def env(threads: int) -> dict[str, Any]:
    import torch  # noqa: F401  (so environment() records the torch version)

    return methodkit.bench.environment(threads)


def per_seed(results: dict, method: str, seeds: list[int]) -> list[float]:
    return [results[(method, s)]["metric"] for s in seeds]


def run_task(
    name: str, args: argparse.Namespace, quick: bool
) -> list[tuple[BenchRecord, list[str]]]:
    import torch

    cfg = dict(CONFIG[name])
    if quick:
        cfg.update(QUICK[name])
    data = load_task(name, quick)
    seeds = args.seeds
    results, rows = {}, []
    t0 = time.perf_counter()
    grad_rows = []
    for seed in seeds:
        for method in cfg["methods"]:
            methodkit.seed_everything(seed)
            probe = None
            if name == "sequential_digits" and method == "hel":
                xp, yp = data[0][:64], data[1][:64]
                probe = (xp, yp, ["hel", "hel_two_pass", "eprop_sym", "tbptt_k10"])
            results[(method, seed)] = train(method, data, cfg, seed, probe)
            if probe is not None:
                grad_rows.append(results[(method, seed)]["cosines"])
            print(
                f"  {name} seed={seed} {method}: {results[(method, seed)]['metric']:.4f} "
                f"({results[(method, seed)]['wall']:.1f}s)",
                flush=True,
            )
    task = data[4]
    metric = "test_accuracy" if task == "clf" else "test_nmse"
    hib = task == "clf"
    for method in cfg["methods"]:
        rows.append(ResultRow.from_values(method, metric, per_seed(results, method, seeds), hib))
        rows.append(
            ResultRow.from_values(
                method, "train_wall_s", [results[(method, s)]["wall"] for s in seeds], False
            )
        )
    claims = []
    hel = per_seed(results, "hel", seeds)
    bptt = per_seed(results, "bptt", seeds)
    gap = max(abs(a - b) for a, b in zip(hel, bptt, strict=True))
    if name in ("sequential_digits", "gunpoint", "delayed_recall"):
        claims.append(
            Claim(
                f"|{metric}(HEL) - {metric}(BPTT)| <= 0.02 per seed",
                gap <= 0.02,
                f"max gap {gap:.4f}",
            )
        )
    thresholds = {
        "sequential_digits": 0.80,
        "gunpoint": 0.85,
        "basic_motions": 0.85,
        "delayed_recall": 0.30,
    }
    thr = thresholds[name]
    mh = float(np.mean(hel))
    if task == "clf":
        claims.append(Claim(f"HEL mean test accuracy >= {thr}", mh >= thr, f"{mh:.4f}"))
    else:
        claims.append(Claim(f"HEL mean test NMSE <= {thr}", mh <= thr, f"{mh:.4f}"))
    if name in ("sequential_digits", "delayed_recall") and not quick:
        for base in ("eprop_sym", "tbptt_k10"):
            mb = float(np.mean(per_seed(results, base, seeds)))
            ok = mh >= mb if hib else mh <= mb
            claims.append(
                Claim(
                    f"HEL mean {metric} {'>=' if hib else '<='} {base}",
                    ok,
                    f"HEL {mh:.4f} vs {base} {mb:.4f}",
                )
            )
    rec = BenchRecord(
        package="hel",
        benchmark=name,
        config={k: v for k, v in cfg.items()},
        seeds=seeds,
        results=rows,
        claim=claims[0],
        claims=claims,
        wall_time_s=time.perf_counter() - t0,
        environment=env(args.threads),
    )
    records = [(rec, [metric])]
    if grad_rows:
        records.append((grad_record(grad_rows, seeds, args, quick, data), ["cosine_to_bptt"]))
    del torch
    return records


def grad_record(
    grad_rows: list, seeds: list[int], args: argparse.Namespace, quick: bool, data: tuple
) -> BenchRecord:
    """Gradient agreement measured every epoch on a fixed batch during HEL training (digits)."""
    import torch

    from hel import HamiltonianEcho, compare_estimators

    t0 = time.perf_counter()
    rows, claims = [], []
    mins = {}
    for k in ("hel", "hel_two_pass", "eprop_sym", "tbptt_k10"):
        vals = [min(ep[k] for ep in run) for run in grad_rows]
        means = [float(np.mean([ep[k] for ep in run])) for run in grad_rows]
        mins[k] = min(vals)
        rows.append(ResultRow.from_values(k, "cosine_to_bptt", means, True))
        rows.append(ResultRow.from_values(k, "min_cosine_to_bptt", vals, True))
    claims.append(
        Claim(
            "cosine(HEL centered, BPTT) >= 0.9999 on every recorded batch (float32)",
            mins["hel"] >= 0.9999,
            f"min {mins['hel']:.6f}",
        )
    )
    claims.append(
        Claim(
            "cosine(HEL two_pass, BPTT) >= 0.999 on every recorded batch (float32)",
            mins["hel_two_pass"] >= 0.999,
            f"min {mins['hel_two_pass']:.6f}",
        )
    )
    # float64 linearized on the digits model
    errs = []
    for seed in seeds:
        model = build_model(seed, 1, 10, 64, 0.2, "mean").double()
        loss = torch.nn.CrossEntropyLoss()
        x, y = data[0][:64].double(), data[1][:64]
        res = compare_estimators(
            model, (x, y), loss, {"lin": HamiltonianEcho(model, loss, mode="linearized")}
        )
        errs.append(res["lin"]["rel_error"])
    rows.append(ResultRow.from_values("hel_linearized_f64", "rel_error_to_bptt", errs, False))
    claims.append(
        Claim(
            "linearized HEL (float64) relative error to BPTT <= 1e-9",
            max(errs) <= 1e-9,
            f"max {max(errs):.2e}",
        )
    )
    claims.append(
        Claim(
            "cosine of e-prop and TBPTT(k=10) to BPTT reported (expected < 0.9)",
            mins["eprop_sym"] < 0.9 and mins["tbptt_k10"] < 0.9,
            f"e-prop min {mins['eprop_sym']:.3f}, tbptt min {mins['tbptt_k10']:.3f}",
        )
    )
    return BenchRecord(
        package="hel",
        benchmark="grad_agreement",
        config={
            "task": "sequential_digits",
            "probe_batch": 64,
            "when": "end of every HEL training epoch",
        },
        seeds=seeds,
        results=rows,
        claim=claims[0],
        claims=claims,
        wall_time_s=time.perf_counter() - t0,
        environment=env(args.threads),
    )


def run_echo_learning(args: argparse.Namespace) -> BenchRecord:
    """RateEchoCell (non-symmetric W): EL with/without homeostasis vs BPTT of the same cell."""
    import torch

    from hel import compare_estimators

    cfg = CONFIG["echo_learning"]
    Xtr, ytr, Xte, yte, task = load_task("sequential_digits", False)
    data = (Xtr[: cfg["n_train"]], ytr[: cfg["n_train"]], Xte, yte, task)
    t0 = time.perf_counter()
    acc, cos = {}, {}
    for seed in args.seeds:
        for method in cfg["methods"]:
            methodkit.seed_everything(seed)
            probe = (Xtr[:64], ytr[:64], ["el"]) if method.startswith("el") else None
            r = train(method, data, cfg, seed, probe, cell="rate")
            acc[(method, seed)] = r["metric"]
            if probe is not None:
                cos[(method, seed)] = r["cosines"][-1]["el"]
            print(
                f"  echo_learning seed={seed} {method}: {r['metric']:.4f} ({r['wall']:.1f}s)",
                flush=True,
            )
    rows, claims = [], []
    for method in cfg["methods"]:
        rows.append(
            ResultRow.from_values(
                method, "test_accuracy", [acc[(method, s)] for s in args.seeds], True
            )
        )
        if method.startswith("el"):
            rows.append(
                ResultRow.from_values(
                    method, "cosine_to_bptt", [cos[(method, s)] for s in args.seeds], True
                )
            )
    # tuned homeostasis weight: best mean cosine on the grid
    grid = [m for m in cfg["methods"] if "=" in m]
    best = max(grid, key=lambda m: np.mean([cos[(m, s)] for s in args.seeds]))
    bc = float(np.mean([cos[(best, s)] for s in args.seeds]))
    c0 = float(np.mean([cos[("el", s)] for s in args.seeds]))
    gap = max(abs(acc[(best, s)] - acc[("bptt", s)]) for s in args.seeds)
    claims.append(
        Claim(
            f"EL with tuned homeostasis ({best}): cosine to BPTT >= 0.95 after the last epoch",
            bc >= 0.95,
            f"{bc:.4f} (without homeostasis {c0:.4f})",
        )
    )
    claims.append(
        Claim(
            f"EL ({best}) accuracy within 0.05 of BPTT on the same cell, per seed",
            gap <= 0.05,
            f"max gap {gap:.4f}",
        )
    )
    del torch, compare_estimators
    return BenchRecord(
        package="hel",
        benchmark="echo_learning",
        config=cfg,
        seeds=args.seeds,
        results=rows,
        claim=claims[0],
        claims=claims,
        wall_time_s=time.perf_counter() - t0,
        environment=env(args.threads),
    )


def run_memory(args: argparse.Namespace, out: Path) -> BenchRecord:
    t0 = time.perf_counter()
    Ts = [200, 2000, 20000]
    kinds = ["bptt", "hel_two_pass", "hel_centered"]
    peak = {}
    envv = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for kind in kinds:
        for T in Ts:
            res = subprocess.run(
                [sys.executable, "-c", MEMORY_SCRIPT, kind, str(T)],
                capture_output=True,
                text=True,
                check=True,
                env=envv,
            )
            info = json.loads(res.stdout.strip().splitlines()[-1])
            peak[(kind, T)] = info["peak_mb"] - info["base_mb"]
            print(
                f"  memory {kind} T={T}: peak RSS above baseline {peak[(kind, T)]:.1f} MB "
                f"(baseline {info['base_mb']:.0f} MB)",
                flush=True,
            )
    rows = [
        ResultRow.from_values(k, f"extra_peak_rss_mb_T{T}", [peak[(k, T)]], False)
        for k in kinds
        for T in Ts
    ]
    growth = {k: peak[(k, Ts[-1])] - peak[(k, Ts[0])] for k in kinds}
    rows += [
        ResultRow.from_values(k, "extra_peak_growth_mb_T200_to_T20000", [growth[k]], False)
        for k in kinds
    ]
    claims = [
        Claim(
            "echo estimators: peak RSS grows < 50 MB from T=200 to T=20000",
            max(growth["hel_two_pass"], growth["hel_centered"]) < 50,
            f"two_pass {growth['hel_two_pass']:.1f} MB, centered {growth['hel_centered']:.1f} MB",
        ),
        Claim(
            "BPTT: peak RSS grows > 150 MB from T=200 to T=20000",
            growth["bptt"] > 150,
            f"{growth['bptt']:.1f} MB",
        ),
    ]
    rec = BenchRecord(
        package="hel",
        benchmark="memory",
        config={
            "n": 32,
            "batch": 8,
            "T": Ts,
            "measure": "fresh subprocess per (estimator, T); after a warm-up call the kernel's "
            "peak-RSS mark is reset (clear_refs=5); VmHWM - VmRSS(before) = extra peak of "
            "one backward call",
        },
        seeds=[0],
        results=rows,
        claim=claims[0],
        claims=claims,
        wall_time_s=time.perf_counter() - t0,
        environment=env(args.threads),
    )
    # curve plot
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for k in kinds:
        ax.plot(Ts, [peak[(k, T)] for T in Ts], marker="o", label=k)
    ax.set_xscale("log")
    ax.set_xlabel("sequence length T (steps)")
    ax.set_ylabel("extra peak RSS of one backward (MB)")
    ax.set_title("memory of one backward call (n=32, B=8)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(Path(out) / "memory.png", dpi=150)
    plt.close(fig)
    return rec


def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--only", nargs="+", default=None, help="run only these benchmarks")
    args = parser.parse_args()
    set_threads(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tasks = (
        ["sequential_digits", "gunpoint"]
        if args.quick
        else ["sequential_digits", "gunpoint", "basic_motions", "delayed_recall"]
    )
    if args.only:
        tasks = [t for t in tasks if t in args.only]
    saved = []
    for name in tasks:
        for rec, metrics in run_task(name, args, args.quick):
            save_record(rec, out)
            plot_results(rec.to_dict(), out / f"{rec.benchmark}.png", metrics=metrics)
            saved.append(rec.to_dict())
    if not args.quick and (not args.only or "echo_learning" in args.only):
        rec = run_echo_learning(args)
        save_record(rec, out)
        plot_results(
            rec.to_dict(), out / "echo_learning.png", metrics=["test_accuracy", "cosine_to_bptt"]
        )
        saved.append(rec.to_dict())
    if not args.quick and (not args.only or "memory" in args.only):
        rec = run_memory(args, out)
        save_record(rec, out)
        saved.append(rec.to_dict())
    return finish(saved, args.quick)


if __name__ == "__main__":
    sys.exit(main())
