"""Helper of bench/run.py: the ``cost`` suite (issue 51), EP-Flow beside the row-simplex flow.

The paper's cost axis for a generator is sampling throughput. EP-Flow and RowSimplexFlow share
the network (the benchmark's width 32 / 2 axial layers / 4 heads), the geometry flow and the
number of Euler steps (50); they differ in the occupancy coordinates and the decoder (EP-Flow:
log-domain Sinkhorn onto the formula's transportation polytope, un-smoothing and re-balancing;
row simplex: a softmax per site). Both are trained briefly on the same synthetic split so the
networks' outputs (and with them the Sinkhorn iteration counts) are those of a trained model,
then each samples the same test formulas, rep by rep in alternating order after one untimed
warm-up call each (``methodkit.bench.interleaved``; median of the reps, load average).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ep_flow import EPFlow, EPFlowConfig, condition_of, make_splits, train_flow
from ep_flow.baselines import RowSimplexFlow
from methodkit.bench import Outcome, ResultRow, check, cost_entry, interleaved

FULL = {"n_train": 300, "n_test": 64, "train_steps": 200, "batch": 32, "lr": 3e-3,
        "ode_steps": 50, "reps": 11, "width": 32, "layers": 2, "heads": 4,
        "lam_f": 12.0}  # fmt: skip
QUICK = {**FULL, "n_train": 40, "n_test": 8, "train_steps": 5, "ode_steps": 5, "reps": 5}
METHOD = "EP-Flow (Euler + Sinkhorn decode)"
PEER = "row-simplex flow (Euler + softmax decode)"


def _trained(cls: type[EPFlow], cfg: dict, train: list, seed: int) -> EPFlow:
    torch.manual_seed(seed)  # the same initialisation for both models
    model = cls(EPFlowConfig(width=cfg["width"], n_layers=cfg["layers"], n_heads=cfg["heads"],
                             lam_f=cfg["lam_f"]))  # fmt: skip
    train_flow(model, train, cfg["train_steps"], cfg["batch"], cfg["lr"], seed,
               schedule="cosine", progress=False)  # fmt: skip
    return model


def cost(args: Any) -> Outcome:
    """Samples/s of EP-Flow vs RowSimplexFlow at equal Euler steps, same process, interleaved."""
    cfg, seed = (QUICK if args.quick else FULL), int(args.seeds[0])
    train, test, _ = make_splits(cfg["n_train"], cfg["n_test"], seed)
    conds = [condition_of(o) for o in test]
    models = {METHOD: _trained(EPFlow, cfg, train, seed),
              PEER: _trained(RowSimplexFlow, cfg, train, seed)}  # fmt: skip
    last: dict[str, list] = {}

    def sampler(name: str) -> Callable[[], None]:
        def run() -> None:
            last[name] = models[name].sample(conds, cfg["ode_steps"], 1, seed)

        return run

    secs = interleaved({k: sampler(k) for k in models}, cfg["reps"])
    rate = {k: [len(conds) / s for s in v] for k, v in secs.items()}
    entry = cost_entry("sampling throughput at equal Euler steps", "samples/s", False,
                       METHOD, rate[METHOD], PEER, rate[PEER])  # fmt: skip
    col = {k: float(np.max([np.abs(o.P.sum(0) - o.c).max() for o in v])) for k, v in last.items()}
    ratios = entry["ratio_reps"]
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (0.0, 0.0, 0.0)
    iqr, med = q3 - q1, entry["ratio"]
    claims = [
        check("the throughput ratio is stable: IQR of the per-rep ratios <= 25 % of their median",
              iqr <= 0.25 * med, f"ratio {med:.3f} (IQR {iqr:.3g}; reps "
              + ", ".join(f"{r:.2f}" for r in ratios) + f"; load average {entry['load_avg']})",
              inputs=[iqr, med]),
        check("at that cost EP-Flow's samples meet the formula's species totals exactly "
              "(max column error <= 1e-5), the row-simplex samples need not",
              col[METHOD] <= 1e-5,
              f"max column error: EP-Flow {col[METHOD]:.2e}, row simplex {col[PEER]:.2e}",
              inputs=[col[METHOD]]),
    ]  # fmt: skip
    rows = [ResultRow.from_values(k, "samples_per_s", v, True) for k, v in rate.items()]
    rows.append(ResultRow.from_values("EP-Flow / row simplex", "throughput_ratio", ratios, True))
    config = {**cfg, "seed": seed, "cost": [entry], "max_column_error": col,
              "setup": "both models trained train_steps steps (cosine lr, same init and data) "
              "before timing; each rep samples all test formulas once (1 sample each)"}  # fmt: skip
    return Outcome(config, rows, claims, seeds=[seed], plot_metrics=["samples_per_s"],
                   units={"samples_per_s": "samples/s"},
                   labels={"samples_per_s": "sampling throughput"})  # fmt: skip
