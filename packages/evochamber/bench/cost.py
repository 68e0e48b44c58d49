"""Helper of bench/run.py: the ``cost`` suite (issue 51), EvoChamber beside its peers.

The paper's cost axis for a multi-agent pool is what it spends on the model: model calls and
tokens per task. EvoChamber (asymmetric CoDream), the broadcast shared-memory pool and a single
agent with private reflective memory run the same streams in one process, seed by seed with the
order alternating (``methodkit.bench.cost_entry`` convention; counts, not wall time, are the axis):

* calls per task on NicheWorld (the spec's 1200-task protocol; the simulator counts team size x
  calls per structure plus CoDream's |team| + 2 calls; no language model);
* prompt + completion tokens per task from LLMPolicy(SmallModelPrompts) over a scripted
  back-end (words stand for tokens; each answer is right with probability 0.6, decided by a
  hash of the call), on the generated stream of the smollm2 suite: tokens grow with every
  insight retrieved into the prompts, which is where routing differs.
"""

from __future__ import annotations

import argparse
import statistics
import warnings
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from smollm2_suite import make_stream
from tasks import SIM_LABEL

from evochamber import (
    EvoChamber,
    EvoConfig,
    LLMPolicy,
    NicheWorld,
    ScriptedChatModel,
    SimPolicy,
    SmallModelPrompts,
)
from evochamber.baselines import BroadcastMemoryPool, SingleAgent
from methodkit.bench import Outcome, ResultRow, check, cost_entry

METHOD = "EvoChamber (asymmetric CoDream)"
PEERS = {"broadcast_pool": "broadcast shared-memory pool", "single_agent": "single agent + memory"}
LABELS = {
    "calls_per_task": "model calls per task (simulator)",
    "tokens_per_task": "tokens per task (scripted back-end, words)",
    "accuracy_last300": "accuracy, last 300 tasks (simulator)",
}
FULL = {"sim_tasks": 1200, "llm_tasks": 200, "seeds": 5}
QUICK = {"sim_tasks": 150, "llm_tasks": 24, "seeds": 5}


def _runner(name: str, policy: Any, seed: int) -> Any:
    if name == "evochamber":
        return EvoChamber(policy, EvoConfig(), seed)
    if name == "broadcast_pool":
        return BroadcastMemoryPool(policy, seed=seed)
    return SingleAgent(policy, memory=True, seed=seed)


def scripted_model(truths: dict[str, str], p_right: float = 0.6) -> ScriptedChatModel:
    """A back-end that answers right with probability ``p_right`` (hash of the call)."""

    def reply(messages: Sequence[dict]) -> str:
        user = messages[1]["content"] if len(messages) > 1 else messages[-1]["content"]
        task = user.rsplit("Task: ", 1)[-1].split("\n", 1)[0].strip()
        key = "|".join(str(m["content"]) for m in messages)
        u = zlib.crc32(key.encode()) / 2**32
        if messages[-1]["role"] == "assistant" and messages[-1]["content"] == "Answer:":
            return f" {truths.get(task, '0')}" if u < p_right else " 0"
        if messages[-1]["role"] == "assistant":  # a lesson
            return " a task asks for a number, compute it twice before answering."
        return "I answered without checking the operator."

    return ScriptedChatModel(reply)


def _one(name: str, seed: int, cfg: dict[str, int], world: NicheWorld) -> dict[str, Any]:
    """Calls per task on NicheWorld and tokens per task over the scripted back-end."""
    log = _runner(name, SimPolicy(world), seed).run(
        world.make_stream(cfg["sim_tasks"], seed=1000 + seed)
    )
    stream = make_stream(cfg["llm_tasks"], seed=1000 + seed)
    truths = {t.prompt: t.meta.get("truth", "") for t in stream}
    policy = LLMPolicy(scripted_model(truths), prompts=SmallModelPrompts(), max_tokens=32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        llm = _runner(name, policy, seed).run(stream)
    fired = [s for s in log.steps + llm.steps if s["codream"]]
    return {
        "calls_per_task": sum(s["calls"] for s in log.steps) / len(log.steps),
        "accuracy_last300": log.accuracy(min(300, len(log.steps))),
        "tokens_per_task": sum(s["tokens"] for s in llm.steps) / len(llm.steps),
        "llm_calls_per_task": sum(s["calls"] for s in llm.steps) / len(llm.steps),
        "codream_calls_ok": all(s["codream_calls"] == len(s["team"]) + 2 for s in fired),
        "codream_fired": len(fired),
    }


def _entry(axis: str, unit: str, peer: str, m: list[float], p: list[float]) -> dict[str, Any]:
    statistic = f"median over {len(m)} seeds (each the mean over the stream), interleaved"
    return cost_entry(axis, unit, True, METHOD, m, PEERS[peer], p, statistic)


def _claims(per: dict[str, list[dict[str, Any]]], entries: list[dict[str, Any]]) -> list:
    """CoDream call accounting on every run; stability of the headline ratio."""
    head = entries[0]["ratio_reps"]
    q = statistics.quantiles(head, n=4) if len(head) >= 2 else [float("nan")] * 3
    iqr, med = q[2] - q[0], entries[0]["ratio"]
    fired = sum(r["codream_fired"] for rs in per.values() for r in rs)
    return [
        check(
            "call accounting: every fired CoDream spent |team| + 2 model calls (reflect per "
            "member, cross-examine, distill), on the simulator and on the scripted back-end",
            all(r["codream_calls_ok"] for rs in per.values() for r in rs),
            f"{fired} CoDreams checked",
            inputs=[float(fired)],
            degenerate=fired == 0,
        ),
        check(
            "the headline ratio (calls per task vs the broadcast pool) is stable: IQR of the "
            "per-seed ratios <= 25 % of their median",
            med is not None and iqr <= 0.25 * med,
            f"IQR {iqr:.3g} vs median {med:.3g}" if med is not None else "no ratio",
            inputs=[iqr, med],
        ),
    ]


def cost(args: argparse.Namespace) -> Outcome:
    """Calls and tokens per task: EvoChamber vs the broadcast pool and a single agent."""
    cfg = QUICK if args.quick else FULL
    world = NicheWorld()
    names = ["evochamber", *PEERS]
    per: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for i in range(cfg["seeds"]):  # rep i: EvoChamber first, rep i + 1: the peers first
        for name in names if i % 2 == 0 else names[::-1]:
            per[name].append(_one(name, i, cfg, world))
    col: Callable[[str, str], list[float]] = lambda n, k: [float(r[k]) for r in per[n]]  # noqa: E731
    entries = []
    for key, axis, unit in (
        ("calls_per_task", "model calls per task (NicheWorld simulator)", "calls/task"),
        ("tokens_per_task", "tokens per task (scripted back-end, words)", "tokens/task"),
    ):
        for peer in PEERS:
            entries.append(_entry(axis, unit, peer, col("evochamber", key), col(peer, key)))
    rows = [
        ResultRow.from_values(n, k, col(n, k), hib)
        for n in names
        for k, hib in (
            ("calls_per_task", False),
            ("tokens_per_task", False),
            ("accuracy_last300", True),
        )
    ]
    claims = _claims(per, entries)
    config = {
        "simulator": SIM_LABEL,
        "streams": f"NicheWorld make_stream({cfg['sim_tasks']}, 1000 + seed) and the smollm2 "
        f"suite's generated stream of {cfg['llm_tasks']} tasks (seed 1000 + seed); seeds "
        f"0..{cfg['seeds'] - 1}",
        "configurations": {
            "evochamber": "EvoConfig() (spec defaults, 20 agents, team 3)",
            "broadcast_pool": "BroadcastMemoryPool (20 agents, team 3)",
            "single_agent": "SingleAgent(memory=True)",
        },
        "back_end": "ScriptedChatModel: right answer with probability 0.6 (crc32 of the "
        "call), fixed lesson and reflection texts; one word = one token",
        "per_seed": per,
        "cost": entries,
    }
    return Outcome(config, rows, claims, seeds=list(range(cfg["seeds"])), labels=LABELS)
