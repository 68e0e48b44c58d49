"""edit-ris benchmark: zero-shot referring segmentation from one step of a tiny editor.

The procedural scene world and a TinyEditor trained from scratch in the run (as an instruction
editor, never on masks) are a synthetic stand-in for RefCOCO and InstructPix2Pix. One seed
(the spec's protocol); only the first of ``--seeds`` is used.

    python bench/run.py [--quick] [--seeds 0] [--threads 1] [--only ris timesteps cost]

Records and plots go to the package's ``bench/results`` (``--out`` to change it).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import tasks
from cost import cost

import methodkit
from methodkit.bench import Outcome, ResultRow, check, compare, run_suite

PACKAGE = "edit-ris"
SPEC_STEPS = 2300
FULL = {
    "train_steps": SPEC_STEPS,
    "batch": 32,
    "lr": 2e-3,
    "n_test": 600,
    "n_FeatureOnly": 200,
    "n_EditDifference": 300,
    "n_ablation": 300,
    "n_probe": 100,
    "edit_steps": 20,
    "eval_batch": 50,
    "cache": True,
}
QUICK = {
    **FULL,
    "train_steps": 3,
    "n_test": 4,
    "n_FeatureOnly": 0,
    "n_EditDifference": 3,
    "n_ablation": 4,
    "n_probe": 4,
    "edit_steps": 4,
    "eval_batch": 6,
    "cache": False,
}
METRICS = ("mIoU", "oIoU", "Pr@0.5", "ms_per_expr", "calls_per_expr")


def _config(args: Any) -> tuple[dict, int]:
    cfg = dict(QUICK if args.quick else FULL)
    cfg["training_scale"] = f"{cfg['train_steps']}/{SPEC_STEPS} optimiser steps of the spec"
    cfg["template"] = tasks.TEMPLATE
    seed = args.seeds[0]
    methodkit.seed_everything(seed)
    return cfg, seed


def _in_grammar(res: dict, method: str) -> float:
    """mIoU pooled over the attr and size splits (equal sizes: the mean of the two)."""
    return float(np.mean([res[s][method]["mIoU"] for s in ("attr", "size")]))


def ris(args: Any) -> Outcome:
    """Main table: every method on the three splits at t0, cost in calls and time."""
    cfg, seed = _config(args)
    res = tasks.run_ris(cfg, seed)
    _, info = tasks.editor(cfg, seed)
    rows = [
        ResultRow.from_values(m, f"{s} {k}", [v[k]], k in ("mIoU", "oIoU", "Pr@0.5"))
        for s, per in res.items()
        for m, v in per.items()
        for k in METRICS
    ]
    e, att, aff, cen = (
        _in_grammar(res, m)
        for m in ("EditRIS", "AttentionOnly", "AttentionAffinity", "CenterPrior")
    )
    calls = res["attr"]["EditRIS"]["calls_per_expr"]
    claims = [
        check(
            "calibration: AttentionOnly and CenterPrior leave room (mIoU <= 0.7, attr+size)",
            max(att, cen) <= 0.7,
            f"{att:.3f}, {cen:.3f}",
            inputs=[att, cen],
        ),
        compare("t0: EditRIS mIoU >= AttentionOnly + 0.05 (attr+size)", e, ">=", att, margin=0.05),
        compare("t0: EditRIS mIoU >= CenterPrior + 0.15 (attr+size)", e, ">=", cen, margin=0.15),
        check(
            "t0: AttentionOnly <= AttentionAffinity <= EditRIS (mIoU, attr+size)",
            att <= aff <= e,
            f"{att:.3f} <= {aff:.3f} <= {e:.3f}",
            inputs=[att, aff, e],
        ),
        check(
            "EditRIS costs exactly 1 denoiser call per expression (counted)",
            calls == 1.0,
            f"{calls:g}",
            inputs=[calls],
        ),
    ]
    cfg = {
        **cfg,
        "editor": info,
        "in_grammar_mIoU": {
            "EditRIS": e,
            "AttentionOnly": att,
            "AttentionAffinity": aff,
            "CenterPrior": cen,
        },
    }
    return Outcome(
        cfg, rows, claims, seeds=[seed], plot_metrics=[f"{s} mIoU" for s in tasks.SPLITS]
    )


def timesteps(args: Any) -> Outcome:
    """Timestep ablation (T, 0.5T, 0.2T) and the separability probe, attr+size."""
    cfg, seed = _config(args)
    table = tasks.run_timesteps(cfg, seed)["rows"]
    rows = [
        ResultRow.from_values(
            f"{k}@{r['timestep']}",
            "mIoU" if "AUROC" not in k and "Fisher" not in k else k.split()[0],
            [v],
            True,
        )
        for r in table
        for k, v in r.items()
        if k not in ("timestep", "t")
    ]
    best = max(table, key=lambda r: r["EditRIS"])
    claims = [
        check(
            "EditRIS at its best timestep reaches mIoU >= 0.45 (attr+size)",
            best["EditRIS"] >= 0.45,
            f"{best['EditRIS']:.3f} at {best['timestep']}",
            inputs=[best["EditRIS"]],
        )
    ]
    cfg = {**cfg, "table": table, "best_timestep": best["timestep"]}
    return Outcome(cfg, rows, claims, seeds=[seed], plot_metrics=["mIoU"])


def main(argv: list[str] | None = None) -> int:
    return run_suite(
        PACKAGE,
        {"ris": ris, "timesteps": timesteps, "cost": cost},
        argv,
        description=__doc__.splitlines()[0],
    )


if __name__ == "__main__":
    sys.exit(main())
