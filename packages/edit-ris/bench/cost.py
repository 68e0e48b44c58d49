"""The cost suite (issue 51): seconds per expression of EditRIS beside its peers.

EditRIS reads one denoiser call per (image, expression); the peers the spec names are the
attention-only reading of the same call (``AttentionOnly``) and the expensive "synthesise then
compare" path (``EditDifference``: the full 20-step edit). All three run side by side in one
process on the same expressions, interleaved rep by rep; the statistic is the median. The
editor is the TinyEditor architecture of the main benchmark trained for a few steps only: the
cost of a call does not depend on the weights (accuracy lives in the ``ris`` record).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import tasks

from edit_ris import EditRIS
from edit_ris import baselines as bl
from methodkit.bench import (
    Outcome,
    ResultRow,
    check,
    compare,
    cost_entry,
    interleaved,
    stable_ratio,
)

EDIT_STEPS = 20  # the spec's EditDifference: the full edit with N = 20 steps


def cost(args: Any) -> Outcome:
    """EditRIS vs AttentionOnly and EditDifference: s/expression, denoiser calls/expression."""
    seed = args.seeds[0]
    n, reps, batch = (6, 2, 6) if args.quick else (50, 7, 50)
    editor_cfg = {"train_steps": 3, "batch": 32, "lr": 2e-3, "cache": False}
    model, _ = tasks.editor(editor_cfg, seed)
    bb = tasks.CountingBackbone(model)
    x, exprs, _ = tasks.test_items("attr", n, seed)
    kw = {"template": tasks.TEMPLATE, "seed": seed}
    methods = {
        "EditRIS": EditRIS(bb, **kw),
        "AttentionOnly": bl.AttentionOnly(bb, **kw),
        f"EditDifference ({EDIT_STEPS} steps)": bl.EditDifference(
            bb, num_inference_steps=EDIT_STEPS, **kw
        ),
    }

    def run(method: Any) -> None:
        for i in range(0, n, batch):
            method.predict(x[i : i + batch], exprs[i : i + batch])

    calls = {}
    for name, method in methods.items():  # one counted pass (also a warm-up)
        c0 = bb.calls
        run(method)
        calls[name] = (bb.calls - c0) / n
    secs = interleaved({k: (lambda m=m: run(m)) for k, m in methods.items()}, reps)
    per_expr = {k: [s / n for s in v] for k, v in secs.items()}
    multi = f"EditDifference ({EDIT_STEPS} steps)"
    axis, unit = "time per expression (32x32 image, 1 CPU thread)", "s/expression"
    stat = f"median of {reps} interleaved reps over {n} expressions"
    cost_list = [
        cost_entry(axis, unit, True, "EditRIS", per_expr["EditRIS"], multi, per_expr[multi], stat),
        cost_entry(
            axis,
            unit,
            True,
            "EditRIS",
            per_expr["EditRIS"],
            "AttentionOnly",
            per_expr["AttentionOnly"],
            stat,
        ),
    ]
    for e, peer in zip(cost_list, (multi, "AttentionOnly"), strict=True):
        e["method_calls_per_expression"] = calls["EditRIS"]
        e["peer_calls_per_expression"] = calls[peer]
    med = {k: float(np.median(v)) for k, v in per_expr.items()}
    claims = [
        check(
            f"EditRIS and AttentionOnly make exactly 1 denoiser call per expression, "
            f"EditDifference {EDIT_STEPS} (counted)",
            calls["EditRIS"] == 1 and calls["AttentionOnly"] == 1 and calls[multi] == EDIT_STEPS,
            ", ".join(f"{k} {v:g}" for k, v in calls.items()),
            inputs=list(calls.values()),
            quick=True,
        ),
        compare(
            f"EditRIS takes less time per expression than the {EDIT_STEPS}-step EditDifference "
            "(medians)",
            med["EditRIS"],
            "<",
            med[multi],
            measured=f"{med['EditRIS']:.4g} vs {med[multi]:.4g} s/expression "
            f"(ratio {cost_list[0]['ratio']:.3g})",
        ),
        stable_ratio(cost_list[1]),
    ]
    rows = [ResultRow.from_values(k, "s_per_expression", v, False) for k, v in per_expr.items()]
    rows += [ResultRow.from_values(k, "denoiser_calls_per_expression", [c], False)
             for k, c in calls.items()]  # fmt: skip
    config = {
        "n_expressions": n,
        "split": "attr",
        "reps": reps,
        "batch": batch,
        "editor": "TinyEditor of the main benchmark, 3 training steps (cost does not depend on "
        "the weights; accuracy is in the ris record)",
        "edit_steps": EDIT_STEPS,
        "timing": "interleaved, order rotating each rep, one warm-up (counted) pass each",
        "cost": cost_list,
    }
    return Outcome(
        config, rows, claims, seeds=[seed], plot_metrics=["s_per_expression"],
        labels={"s_per_expression": "time per expression"}, units={"s_per_expression": "s"},
    )  # fmt: skip
