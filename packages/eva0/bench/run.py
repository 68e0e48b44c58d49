"""EVA-0 digits-C reproduction: a tiny ViT on corrupted sklearn digits, all TTA methods.

    python bench/run.py --threads 1            # full (3 seeds), from packages/eva0
    python bench/run.py --quick --seeds 0      # smoke run (claims are not the full verdicts)

Writes the ``digits_c`` record (JSON + PNG) and ``digits_c_curve.png``. The severity table
of ``eva0.corruptions`` was calibrated with ``python bench/calibrate.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from tasks import (
    MEMORY_METHODS,
    METHODS,
    QUICK_METHODS,
    TEST_CORRUPTIONS,
    accuracy,
    curve_plot,
    digits16,
    make_method,
    memory_job,
    stream,
    train_vit,
)

import methodkit
from eva0 import adapt_stream
from methodkit.bench import Claim, Outcome, ResultRow, check, compare, peak_memory, run_suite

PACKAGE = "eva0"


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _peak_memory(state: dict, src: torch.Tensor, batches: list) -> dict[str, float]:
    """Peak MiB of each method on 6 batches, each in a fresh spawned process."""
    mem = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "state.pt")
        torch.save({"state": state, "src": src, "batches": [x for x, _ in batches[:6]]}, path)
        for m in MEMORY_METHODS:
            mem[m] = peak_memory(memory_job, args=(path, m)) / 2**20
            _log(f"[memory] {m}: {mem[m]:.2f} MiB")
    return mem


def _claims(
    mu: dict[str, float],
    med: dict[str, float],
    cpb: dict[str, float],
    mem: dict[str, float],
    noadapt: dict[str, float],
) -> list[Claim]:
    eva, noa, foa = mu["EVA-0"], mu["NoAdapt"], mu["FOA"]
    claims = [
        compare(
            "EVA-0 mean accuracy >= NoAdapt + 1.0 point",
            eva,
            ">=",
            noa,
            margin=0.01,
            measured=f"EVA-0 {100 * eva:.2f}% vs NoAdapt {100 * noa:.2f}% "
            f"({100 * (eva - noa):+.2f} points)",
        ),
        check(
            "EVA-0 mean accuracy >= FOA - 3 points at <= 1/5 of FOA's wall-clock per sample",
            eva >= foa - 0.03 and med["EVA-0"] <= med["FOA"] / 5,
            f"EVA-0 {100 * eva:.2f}% vs FOA {100 * foa:.2f}%; "
            f"{1e3 * med['EVA-0']:.3f} vs {1e3 * med['FOA']:.3f} ms/sample "
            f"(FOA/EVA-0 = {med['FOA'] / med['EVA-0']:.1f}x; paper: 14x)",
            inputs=[eva, foa, med["EVA-0"], med["FOA"]],
        ),
    ]
    # Memory is measured in full runs only: without it the claim is "not measured".
    mem_ok = bool(mem) and mem["EVA-0"] <= 1.1 * mem["NoAdapt"] + 4 and mem["EVA-0"] < mem["Tent"]
    claims.append(
        check(
            "EVA-0 makes exactly 2 model calls per batch; peak memory <= 1.1x NoAdapt + 4 MiB and "
            "below Tent's",
            cpb["EVA-0"] == 2.0 and mem_ok,
            f"calls/batch {cpb['EVA-0']:.2f}; "
            + (
                ", ".join(f"{m} {v:.2f} MiB" for m, v in mem.items())
                if mem
                else "memory not measured in --quick"
            ),
            inputs=[cpb["EVA-0"], *(mem.get(m) for m in ("EVA-0", "NoAdapt", "Tent"))],
            degenerate=not mem,
        )
    )
    claims.append(
        check(
            "severity-5 table leaves the source model between 35 % and 85 % on every corruption",
            all(0.35 <= v <= 0.85 for v in noadapt.values()),
            ", ".join(f"{c} {100 * v:.1f}%" for c, v in noadapt.items()),
            inputs=list(noadapt.values()),
        )
    )
    return claims


def _config(epochs: int, clean: float, corruptions: list[str], quick: bool) -> dict:
    return {
        "data": "sklearn digits 8x8 -> 16x16 bilinear, 1200 train / 597 test (seed 0); "
        "test corruptions at severity 5 (eva0.corruptions table), corruption rng 1234, "
        "stream shuffled with seed 0, batch 16, reset between corruptions",
        "model": "TinyViT (timm VisionTransformer layout) img 16, patch 4, dim 64, depth 4, "
        f"heads 4, mlp 2; AdamW lr 3e-3 wd 0.05, one-cycle, {epochs} epochs",
        "clean_test_accuracy": clean,
        "corruptions": corruptions,
        "methods": {
            "Tent": "SGD lr 1e-3 momentum 0.9 on LayerNorm affines",
            "DeYO": "as Tent; ent_margin 0.5 ln 10, PLPD > 0.2, 4x4 patch shuffle",
            "FOA": "3 prompts, popsize 4 + 3 ln 192 = 19 (+1 incumbent), lambda 0.4, "
            "sigma0 1, built-in CMA-ES, activation shift; source stats on 256 train images",
            "ZOShared": "shared direction, entropy, no anchor, eps 0.02, lr 0.05",
            "EVA-0": "eps 0.02, lr 0.05, anchor source, lambda 0.1, scale-invariant entropy, "
            "per-sample Gaussian directions on LayerNorm affines",
        },
        "timing": "ms per sample = stream wall-clock / samples, median over seeds, 1 thread",
        "memory": "methodkit.bench.peak_memory (spawned process, RSS above torch import), "
        "6 batches",
        "quick": quick,
        "quick_note": "quick: 6 epochs, 2 corruptions x 6 batches, 4 methods" if quick else "",
    }


def digits_c(args: argparse.Namespace) -> Outcome:
    """All methods on the 8 severity-5 corruption streams, every seed; memory in full runs."""
    seeds, quick = list(args.seeds), args.quick
    methodkit.seed_everything(seeds[0])
    Xtr, ytr, Xte, yte = digits16()
    epochs = 6 if quick else 30
    t0 = time.perf_counter()
    model = train_vit(Xtr, ytr, epochs)
    clean = accuracy(model, Xte, yte)
    _log(f"[train] {epochs} epochs, clean test acc {clean:.4f} ({time.perf_counter() - t0:.0f}s)")
    src = Xtr[:256]
    corruptions = TEST_CORRUPTIONS[:2] if quick else TEST_CORRUPTIONS
    methods = QUICK_METHODS if quick else METHODS
    streams = {c: stream(Xte, yte, c)[: 6 if quick else None] for c in corruptions}
    state = {k: v.clone() for k, v in model.state_dict().items()}
    acc = {m: {c: [] for c in corruptions} for m in methods}
    sec_per_sample: dict[str, list[float]] = {m: [] for m in methods}
    calls: dict[str, list[float]] = {m: [] for m in methods}
    curves: dict[str, list[float]] = {}
    for seed in seeds:
        for m in methods:
            total_s, total_n, total_calls, total_batches = 0.0, 0, 0, 0
            for c, batches in streams.items():
                model.load_state_dict(state)
                method = make_method(m, model, seed, src)
                torch.manual_seed(seed)
                res = adapt_stream(method, batches)
                acc[m][c].append(res["accuracy"])
                total_s += res["seconds"]
                total_n += res["n"]
                total_calls += res["forward_passes"]
                total_batches += len(batches)
                if seed == seeds[0] and c == corruptions[0]:
                    curves[m] = res["per_batch"]
            sec_per_sample[m].append(total_s / total_n)
            calls[m].append(total_calls / total_batches)
            mean_acc = sum(acc[m][c][-1] for c in corruptions) / len(corruptions)
            _log(
                f"[seed {seed}] {m:24s} mean acc {mean_acc:.4f}  "
                f"{1e3 * total_s / total_n:.3f} ms/sample"
            )
        model.load_state_dict(state)
    mem = {} if quick else _peak_memory(state, src, streams[corruptions[0]])

    mean_acc = {
        m: [sum(acc[m][c][i] for c in corruptions) / len(corruptions) for i in range(len(seeds))]
        for m in methods
    }
    results = [ResultRow.from_values(m, "mean_accuracy", mean_acc[m], True) for m in methods]
    results += [
        ResultRow.from_values(m, f"acc_{c}", acc[m][c], True) for c in corruptions for m in methods
    ]
    results += [ResultRow.from_values(m, "model_calls_per_batch", calls[m], False) for m in methods]
    results += [
        ResultRow.from_values(
            m, "ms_per_sample", [statistics.median(1e3 * s for s in sec_per_sample[m])], False
        )
        for m in methods
    ]
    results += [ResultRow.from_values(m, "peak_memory_mib", [v], False) for m, v in mem.items()]
    claims = _claims(
        mu={m: statistics.fmean(v) for m, v in mean_acc.items()},
        med={m: statistics.median(v) for m, v in sec_per_sample.items()},
        cpb={m: statistics.fmean(v) for m, v in calls.items()},
        mem=mem,
        noadapt={c: statistics.fmean(acc["NoAdapt"][c]) for c in corruptions},
    )
    return Outcome(
        config=_config(epochs, clean, corruptions, quick),
        results=results,
        claims=claims,
        plot_metrics=["mean_accuracy"],
        units={"mean_accuracy": "fraction"},
        extra_plots={"curve": lambda _rec, path: curve_plot(curves, corruptions[0], path)},
    )


def main(argv: list[str] | None = None) -> int:
    return run_suite(PACKAGE, {"digits_c": digits_c}, argv)


if __name__ == "__main__":
    sys.exit(main())
