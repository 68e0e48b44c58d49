"""Why does EO-WM's forecast barely follow the weather? Small, fast probes on a validation world.

Not a benchmark suite (no record): the README's implementation notes quote its output.
World seed 7 (never used by the benchmark), a mid-size world, one model per variant.

    python bench/diagnose_weather.py [--steps 300] [--variants base norm] [--guidance 1 3]

Per variant it prints: (1) the share of the flow target's variance that the weather explains
(counterfactual pairs: same state, noise and clouds, another year's future forcing), (2) how
much the training loss rises when the anomaly/stress pathway is dropped or given the partner's
forcing, (3) the size of the anomaly pathway's contribution to the velocity, and (4) the
sensitivity metrics of the benchmark (swap and dose ratios) for each guidance weight.
"""

from __future__ import annotations

import argparse
import sys
import time

import tasks
import torch
from run import FULL

import eo_wm.train as T  # noqa: N812
from eo_wm.model import EOWorldModel
from eo_wm.train import cond_of, flow_matching_loss, sample_ensemble, train_model

_FULL_STATS = T.normalization_stats


def _stats_no_stress(data: dict) -> dict:
    return {k: v for k, v in _FULL_STATS(data).items() if not k.startswith("stress_")}


CFG = {
    **FULL,
    "train_locations": 80,
    "test_locations": 20,
    "years": 4,
    "train_windows": 800,
    "n_extreme": 8,
    "n_pairs": 4,
    "n_cf": 16,
    "n_dose": 12,
}


def weather_share(model: EOWorldModel, cf: dict, n: int) -> float:
    """Mean square of the flow-space difference of pair truths over the flow target's."""
    a = {k: v[:n] for k, v in cf.items()}
    b = {k: v[n:] for k, v in cf.items()}
    xa = model.to_flow_space(a["target"], a["context"], a["context_mask"])
    xb = model.to_flow_space(b["target"], b["context"], b["context_mask"])
    m = a["target_mask"].expand_as(xa)
    return float(((xa - xb) ** 2 * m).sum() / 2 / ((xa**2) * m).sum())


@torch.no_grad()
def loss_probe(model: EOWorldModel, cf: dict, n: int, reps: int = 20) -> dict[str, float]:
    """Flow loss of pair-a windows: own forcing, no anomaly path, partner's forcing."""
    a = {k: v[:n] for k, v in cf.items()}
    swapped = {**a, **{k: cf[k][n:] for k in ("anomaly", "stress", "baseline", "weather")}}
    out = {"own": 0.0, "partner": 0.0}
    for r in range(reps):
        for name, batch in (("own", a), ("partner", swapped)):
            g = torch.Generator().manual_seed(r)
            model.train()  # condition dropout as in training
            out[name] += flow_matching_loss(model, batch, g).item() / reps
    model.eval()
    return out


@torch.no_grad()
def pathway_size(model: EOWorldModel, cf: dict) -> float:
    """RMS of v(full) - v(no anomaly path) over RMS of v, at s in {0.25, 0.5, 0.75}."""
    if not model.has_cross:
        return float("nan")
    num = den = 0.0
    g = torch.Generator().manual_seed(0)
    B = cf["context"].shape[0]
    for s in (0.25, 0.5, 0.75):
        x = torch.randn(cf["target"].shape, generator=g)
        sv = torch.full((B,), s)
        args = (x, sv, cf["context"], cf["context_mask"], cf["static"], cond_of(model, cf))
        v = model(*args)
        v0 = model(*args, keep_anomaly=torch.zeros(B))
        num += float(((v - v0) ** 2).mean())
        den += float((v**2).mean())
    return (num / den) ** 0.5


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--variants", nargs="+", default=["base"])
    p.add_argument("--guidance", nargs="+", type=float, default=[1.0, 3.0])
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args()
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    world = tasks.build_world(CFG, a.seed)
    n = CFG["n_cf"]
    print("world", tasks.sensitivity_world(world), f"{time.perf_counter() - t0:.0f}s")
    for variant in a.variants:
        kw = {"conditioning": "undifferentiated"} if variant == "undiff" else {}
        torch.manual_seed(0)
        model = EOWorldModel(tasks.model_config(CFG, **kw))
        # raw_stress: the pre-fix inputs (stress not standardised before the forcing MLP)
        T.normalization_stats = _stats_no_stress if variant == "raw_stress" else _FULL_STATS
        g = torch.Generator().manual_seed(0)
        losses = train_model(model, world["train"], a.steps, CFG["batch"], CFG["lr"], generator=g)
        cf = world["cf"]
        line = {
            "variant": variant,
            "steps": a.steps,
            "final_loss": round(sum(losses[-50:]) / 50, 4),
            "weather_share_of_target": round(weather_share(model, cf, n), 4),
            "loss": {k: round(v, 5) for k, v in loss_probe(model, cf, n).items()},
            "anomaly_path_rel_size": round(pathway_size(model, cf), 4),
        }
        print(line, f"{time.perf_counter() - t0:.0f}s", flush=True)
        for w in a.guidance if model.has_cross else [1.0]:
            preds = {
                s: sample_ensemble(
                    model,
                    world[s],
                    CFG["members"],
                    CFG["euler_steps"],
                    generator=torch.Generator().manual_seed(1),
                    guidance=w,
                ).numpy()
                for s in ("cf", "dose")
            }
            sens = tasks.sensitivity(world, {"members": preds})
            print(
                f"  guidance {w}:",
                {k: round(v, 4) for k, v in sens.items()},
                f"{time.perf_counter() - t0:.0f}s",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
