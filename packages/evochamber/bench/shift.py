"""The niche-shift benchmark: a seventh niche appears mid-stream (NicheWorld, no language model).

Tasks 0..599 come from the spec's six niches and shares; from task 600 on, a new niche ``n6``
takes a 30 % share (the six others keep their relative shares in the remaining 70 %). The
lifecycle's operators exist to cover such a niche (seed an agent for an uncovered niche, fork
its top agent when its share outgrows its specialists); this suite measures whether they do,
on the new niche over tasks 900..1199, with the lifecycle on, off, and each operator off.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from evochamber import EvoChamber, EvoConfig, NicheWorld, NicheWorldConfig, SimPolicy, Task
from evochamber.metrics import stable_specialists

BASE = NicheWorldConfig().shares
NEW = "n6"
START, SHARE, N_TASKS, WINDOW = 600, 0.3, 1200, 300

SHIFT_CONFIGS: dict[str, dict] = {
    "lifecycle_on": {},
    "lifecycle_off": {"lifecycle": False},
    "no_prune": {"prune": False},
    "no_merge": {"merge": False},
    "no_fork": {"fork": False},
    "no_seed": {"seed_agents": False},
}
QUICK_SHIFT = ["lifecycle_on", "lifecycle_off"]
SHIFT_HIB = {
    "new_niche_accuracy": True,
    "old_niches_accuracy": True,
    "accuracy_last300": True,
    "new_niche_specialist": True,
    "newborn_anchor_share": None,
    "newborn_anchor_accuracy": True,
    "elder_anchor_accuracy": True,
    "seeds_after_shift": None,
    "forks_after_shift": None,
    "prunes_after_shift": None,
    "merges_after_shift": None,
}


def shift_stream(
    n_tasks: int = N_TASKS, seed: int = 0, start: int = START, share: float = SHARE
) -> list[Task]:
    """Six niches until ``start``, then a seventh niche at ``share`` of the tasks."""
    pre = NicheWorld(NicheWorldConfig(n_niches=7, shares=(*BASE, 0.0)))
    post_shares = (*((1.0 - share) * s / sum(BASE) for s in BASE), share)
    post = NicheWorld(NicheWorldConfig(n_niches=7, shares=post_shares))
    head = pre.make_stream(start, seed=seed)
    tail = post.make_stream(n_tasks - start, seed=seed + 7919)
    tail = [dataclasses.replace(t, task_id=f"t{start + i:05d}") for i, t in enumerate(tail)]
    return head + tail


def _acc(rows: list[dict]) -> float:
    known = [r["success"] for r in rows if r["success"] is not None]
    return float(np.mean(known)) if known else math.nan


def run_shift(name: str, seed: int, n_tasks: int = N_TASKS, start: int = START) -> dict:
    """One seeded run of configuration ``name`` on the shifted stream; its metrics."""
    window = n_tasks - (start + (n_tasks - start) // 2)  # 300 of 1200: tasks 900..1199
    stream = shift_stream(n_tasks, 2000 + seed, start)
    eng = EvoChamber(SimPolicy(NicheWorld()), EvoConfig(**SHIFT_CONFIGS[name]), seed)
    log = eng.run(stream, progress=False)
    tail = log.steps[-window:]
    born = {a.agent_id: a.born_t for a in eng.population.agents + eng.population.retired}
    after = log.steps[start:]
    young = [s for s in after if born.get(s["anchor"], 0) >= start]
    elder = [s for s in after if born.get(s["anchor"], 0) < start]
    late = [e for e in log.events if e["t"] >= start]
    return {
        "new_niche_accuracy": _acc([s for s in tail if s["niche"] == NEW]),
        "old_niches_accuracy": _acc([s for s in tail if s["niche"] != NEW]),
        "accuracy_last300": _acc(tail),
        "new_niche_specialist": float(NEW in stable_specialists(log.steps, window=window)),
        "newborn_anchor_share": len(young) / len(after),
        "newborn_anchor_accuracy": _acc(young),
        "elder_anchor_accuracy": _acc(elder),
        **{
            f"{kind}s_after_shift": float(sum(e["kind"] == kind for e in late))
            for kind in ("seed", "fork", "prune", "merge")
        },
    }
