"""EVA-0 digits-C reproduction: a timm ViT trained on sklearn digits, corrupted test streams.

    python bench/run.py --threads 1            # full (3 seeds), from packages/eva0
    python bench/run.py --quick --seeds 0      # smoke run (claims are not the full verdicts)

``digits_c``: every method tuned on held-out motion-blur streams (bench/tuning.py), then run
on the 8 test corruptions at severities 5 (full streams) and 3 (half streams).
``default_safety``: EVA-0 at its library defaults vs NoAdapt on every bundled corruption, for
a ViT/LayerNorm, a CNN/BatchNorm and a CNN/GroupNorm (bench/safety.py, bench/zoo.py).
The severity table of ``eva0.corruptions`` was calibrated with ``python bench/calibrate.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import torch
import zoo
from evaluate import evaluate, result_rows, sev_mean
from safety import safety_plot, safety_table
from tasks import (
    MEMORY_METHODS,
    METHODS,
    QUICK_METHODS,
    TEST_CORRUPTIONS,
    accuracy,
    curve_plot,
    digits16,
    memory_job,
    stream,
)
from tuning import HELD_OUT, tune

import methodkit
from eva0 import EVA0
from eva0.corruptions import NAMES
from eva0.defaults import PROFILES
from methodkit.bench import Claim, Outcome, ResultRow, check, compare, peak_memory, run_suite

PACKAGE = "eva0"


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _peak_memory(state: dict, src: torch.Tensor, batches: list, cfg: dict) -> dict[str, float]:
    """Peak MiB of each method (tuned configuration) on 6 batches, in fresh spawned processes."""
    mem = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "state.pt")
        blob = {"state": state, "src": src, "batches": [x for x, _ in batches[:6]], "cfg": cfg}
        torch.save(blob, path)
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


SCALE = {
    "severity 5": "full test streams (38 batches of 16)",
    "severity 3": "first 19 batches of each stream (factor 0.5)",
    "tuning": "held-out motion_blur, severities 3 and 5, first 19 batches (factor 0.5), seed 0",
    "grids": "EVA-0 24 configs, ZOShared 6, FOA 4, Tent 3, DeYO 3 (bench/tuning.py)",
}


def _config(epochs: int, clean: float, best: dict, quick: bool) -> dict:
    return {
        "data": "sklearn digits 8x8 -> 16x16 bilinear, 1200 train / 597 test (seed 0); "
        "test corruptions at severities 5 and 3 (eva0.corruptions table), corruption rng 1234, "
        "stream shuffled with seed 0, batch 16, reset between corruptions",
        "model": "timm VisionTransformer img 16, patch 4, dim 64, depth 4, heads 4, mlp 2, "
        f"trained from scratch: AdamW lr 3e-3 wd 0.05, one-cycle, {epochs} epochs",
        "clean_test_accuracy": clean,
        "corruptions": TEST_CORRUPTIONS,
        "tuned_configs": best,
        "eva0_defaults": f"EVA0(model): layer_norm profile {PROFILES['layer_norm']}; "
        "anchor 0.1, guard 0.05",
        "foa": "3 prompts, popsize 4 + 3 ln 192 = 19 (+1 incumbent) or 2 (+1) for "
        "'FOA (3 passes)', built-in CMA-ES, activation shift; source stats on 256 train images",
        "scale": SCALE,
        "timing": "ms per sample = severity-5 stream wall-clock / samples, median over seeds",
        "memory": "methodkit.bench.peak_memory (spawned process, RSS above torch import), "
        "6 batches, weights in the identical eva0.models.TinyViT (timm import not counted)",
        "quick": quick,
        "quick_note": "quick: the identical eva0.models.TinyViT instead of timm's (no timm "
        "import), 1 epoch, 1 corruption x 4 batches, severity 5, first grid point unscored, "
        "5 methods"
        if quick
        else "",
    }


def digits_c(args: argparse.Namespace) -> Outcome:
    """Every method tuned on held-out streams, then on the test corruption streams."""
    seeds, quick = list(args.seeds), args.quick
    methodkit.seed_everything(seeds[0])
    Xtr, ytr, Xte, yte = digits16()
    epochs = 1 if quick else zoo.EPOCHS["vit"]
    model = zoo.trained("vit", Xtr, ytr, epochs, use_timm=not quick)
    clean = accuracy(model, Xte, yte)
    _log(f"[train] vit {epochs} epochs, clean test acc {clean:.4f}")
    src, state = Xtr[:256], {k: v.clone() for k, v in model.state_dict().items()}
    held = [] if quick else [stream(Xte, yte, HELD_OUT, s)[:19] for s in (3, 5)]
    best, _ = tune(model, state, src, held, quick)
    _log(f"[tune] {best}")
    cells = [(c, 5) for c in TEST_CORRUPTIONS] + [(c, 3) for c in TEST_CORRUPTIONS]
    cells = cells[:1] if quick else cells
    limit = {5: 4 if quick else None, 3: 19}
    streams = {(c, s): stream(Xte, yte, c, s)[: limit[s]] for c, s in cells}
    methods = QUICK_METHODS if quick else METHODS
    acc, sps, calls, curves = evaluate(model, src, streams, methods, seeds, best)
    mem = {} if quick else _peak_memory(state, src, streams[cells[0]], best)
    rows = result_rows(acc, sps, calls, mem, seeds)
    claims = _claims(
        mu={m: statistics.fmean(sev_mean(acc[m], 5, i) for i in range(len(seeds))) for m in acc},
        med={m: statistics.median(v) for m, v in sps.items()},
        cpb={m: statistics.fmean(v) for m, v in calls.items()},
        mem=mem,
        noadapt={c: statistics.fmean(v) for (c, s), v in acc["NoAdapt"].items() if s == 5},
    )
    return Outcome(
        config=_config(epochs, clean, best, quick),
        results=rows,
        claims=claims,
        plot_metrics=["mean_accuracy"],
        units={"mean_accuracy": "fraction"},
        extra_plots={"curve": lambda _rec, path: curve_plot(curves, cells[0][0], path)},
    )


def default_safety(args: argparse.Namespace) -> Outcome:
    """EVA-0 at its defaults vs NoAdapt: every model kind, bundled corruption, severity 3 and 5."""
    seeds, quick = list(args.seeds), args.quick
    methodkit.seed_everything(seeds[0])
    Xtr, ytr, Xte, yte = digits16()
    corruptions = NAMES[:1] if quick else list(NAMES)
    tables, rows, clean, profiles = {}, [], {}, {}
    epochs = {k: 1 if quick else zoo.EPOCHS[k] for k in zoo.KINDS}
    for kind in zoo.KINDS:
        model = zoo.trained(kind, Xtr, ytr, epochs[kind], use_timm=not quick)
        clean[kind] = accuracy(model, Xte, yte)
        profiles[kind] = EVA0(model).profile
        deltas, base = safety_table(model, Xte, yte, corruptions, seeds, 3 if quick else None)
        tables[kind] = deltas
        per_seed = [statistics.fmean(v[i] for v in deltas.values()) for i in range(len(seeds))]
        rows.append(ResultRow.from_values(kind, "mean_delta_points", per_seed, True))
        cell_means = [statistics.fmean(v) for v in deltas.values()]
        rows.append(ResultRow.from_values(kind, "worst_delta_points", [min(cell_means)], True))
        rows += [
            ResultRow.from_values(kind, f"delta_{c}_s{s}", v, True) for (c, s), v in deltas.items()
        ]
        rows += [
            ResultRow.from_values(kind, f"noadapt_{c}_s{s}", [b], True)
            for (c, s), b in base.items()
        ]
        _log(
            f"[safety] {kind}: worst mean delta {min(map(statistics.fmean, deltas.values())):+.2f}"
        )
    worst = {k: min(t.items(), key=lambda kv: statistics.fmean(kv[1])) for k, t in tables.items()}
    lowest = min(statistics.fmean(v) for _, v in worst.values())
    text = ", ".join(
        f"{k} {statistics.fmean(v):+.2f} ({c} s{s})" for k, ((c, s), v) in worst.items()
    )
    claim = compare(
        "EVA-0 at its defaults is never more than 0.5 points below NoAdapt (mean over seeds) on "
        "any bundled corruption, severity 3 or 5, for ViT/LN, CNN/BN and CNN/GN",
        lowest,
        ">=",
        -0.5,
        measured=f"worst cell per kind: {text}",
    )
    return Outcome(
        config={
            "kinds": zoo.__doc__.split("\n\n")[1],
            "epochs": epochs,
            "clean_test_accuracy": clean,
            "corruptions": corruptions,
            "severities": [3, 5],
            "defaults": "EVA0(model, seed=s): anchor_weight 0.1, guard 0.05; eps, lr, max_step "
            f"from the model's profile (eva0.defaults.PROFILES): {PROFILES}",
            "profiles": profiles,
            "streams": "full test streams (38 batches of 16)" if not quick else "3 batches",
            "quick": quick,
        },
        results=rows,
        claims=[claim],
        plot_metrics=["mean_delta_points", "worst_delta_points"],
        units={"mean_delta_points": "points", "worst_delta_points": "points"},
        extra_plots={"table": lambda _rec, path: safety_plot(tables, path)},
    )


def main(argv: list[str] | None = None) -> int:
    return run_suite(PACKAGE, {"digits_c": digits_c, "default_safety": default_safety}, argv)


if __name__ == "__main__":
    sys.exit(main())
