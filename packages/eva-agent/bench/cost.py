"""Helper of bench/run.py: the ``cost`` suite (issue 51), EVA beside Direct and Debate.

The paper's cost axis for an evidence-seeking agent is what it spends per question: model
(VLM) calls and tool calls. EVA (threshold routing calibrated on a validation split for the
spec's 0.6 tool-call rate), Direct and Debate (3 agents, 2 rounds) answer the same
ShapeTextVQA questions in one process, seed by seed with the order alternating
(``methodkit.bench.cost_entry`` convention; counts, not wall time, are the axis). The VLM is
the labelled SimulatedVLM (no neural network); the tools are the real offline ones behind one cache.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
from tasks import TARGET_RATE, make_tools

from eva_agent import EVAgent, ShapeTextVQA, ThresholdRouter, calibrate_tau
from eva_agent.baselines import Debate, Direct
from eva_agent.metrics import is_correct, tool_call_rate
from eva_agent.tools import ToolCache
from eva_agent.vlm import SimParams, SimulatedVLM
from methodkit.bench import Outcome, ResultRow, check, cost_entry

NAMES = {"eva": "EVA (SER + ITR + ECV)", "direct": "Direct", "debate": "Debate (3 agents x 2)"}
LABELS = {
    "vlm_calls": "model (VLM) calls per question",
    "tool_calls": "tool calls per question",
    "accuracy": "accuracy (simulated VLM, real tools)",
}
FULL = {"n_test": 60, "n_val": 120, "seeds": 5}
QUICK = {"n_test": 12, "n_val": 30, "seeds": 5}


def _methods(seed: int, n_val: int, cache: ToolCache) -> dict[str, Any]:
    vlm = SimulatedVLM(SimParams(), seed=seed)
    val = list(ShapeTextVQA(n_val, seed=seed, split="val"))
    probe = ThresholdRouter(0.5)
    fast = [vlm.answer(it.image, it.question) for it in val]
    risks = [probe.risk(c, it.qtype, answer=a) for (a, c), it in zip(fast, val, strict=True)]
    tau = calibrate_tau(risks, TARGET_RATE)
    return {
        "eva": EVAgent(vlm, make_tools(cache), ThresholdRouter(tau)),
        "direct": Direct(vlm),
        "debate": Debate(vlm, n_agents=3, rounds=2),
    }


def _measure(method: Any, items: list) -> dict[str, float]:
    rs = [method.run(it.image, it.question, it.qtype) for it in items]
    ok = [is_correct(r.answer, it.answer, it.qtype) for r, it in zip(rs, items, strict=True)]
    vlm = [float(r.n_vlm_calls) for r in rs]
    tools = [float(r.n_tool_calls) for r in rs]
    return {
        "vlm_calls": float(np.mean(vlm)),
        "tool_calls": float(np.mean(tools)),
        "all_calls": float(np.mean(vlm) + np.mean(tools)),
        "tool_call_rate": tool_call_rate(rs),
        "accuracy": float(np.mean(ok)),
    }


def _entry(axis: str, unit: str, peer: str, m: list[float], p: list[float]) -> dict[str, Any]:
    statistic = f"median over {len(m)} seeds (each the mean over the test questions), interleaved"
    return cost_entry(axis, unit, True, NAMES["eva"], m, NAMES[peer], p, statistic)


def _claims(per: dict[str, list[dict[str, float]]], entries: list[dict[str, Any]]) -> list:
    """The spec's tool-call rate, the peers' call counts, stability of the headline ratio."""

    def col(n: str, k: str) -> list[float]:
        return [r[k] for r in per[n]]

    rate = statistics.median(col("eva", "tool_call_rate"))
    head = entries[0]["ratio_reps"]
    q = statistics.quantiles(head, n=4) if len(head) >= 2 else [float("nan")] * 3
    iqr, med = q[2] - q[0], entries[0]["ratio"]
    return [
        check(
            "EVA's tool-call rate on test <= 0.65 (spec; tau calibrated for 0.6 on validation)",
            rate <= 0.65,
            f"median over seeds {rate:.3f}",
            inputs=[rate],
        ),
        check(
            "Debate spends exactly 3 agents x 2 rounds = 6 model calls per question and Direct 1",
            all(v == 6.0 for v in col("debate", "vlm_calls"))
            and all(v == 1.0 for v in col("direct", "vlm_calls")),
            f"debate {col('debate', 'vlm_calls')}, direct {col('direct', 'vlm_calls')}",
        ),
        check(
            "the headline ratio (model calls vs Debate) is stable: IQR of the per-seed ratios "
            "<= 25 % of their median",
            med is not None and iqr <= 0.25 * med,
            f"IQR {iqr:.3g} vs median {med:.3g}" if med is not None else "no ratio",
            inputs=[iqr, med],
        ),
    ]


def cost(args: argparse.Namespace) -> Outcome:
    """Model and tool calls per question: EVA vs Direct and Debate."""
    cfg = QUICK if args.quick else FULL
    cache = ToolCache()
    per: dict[str, list[dict[str, float]]] = {n: [] for n in NAMES}
    for i in range(cfg["seeds"]):  # rep i: EVA first, rep i + 1: the peers first
        methods = _methods(i, cfg["n_val"], cache)
        items = list(ShapeTextVQA(cfg["n_test"], seed=i, split="test"))
        for name in list(NAMES) if i % 2 == 0 else list(NAMES)[::-1]:
            per[name].append(_measure(methods[name], items))
    col: Callable[[str, str], list[float]] = lambda n, k: [r[k] for r in per[n]]  # noqa: E731
    entries = [
        _entry("model calls per question", "VLM calls/question", "debate",
               col("eva", "vlm_calls"), col("debate", "vlm_calls")),
        _entry("model calls per question", "VLM calls/question", "direct",
               col("eva", "vlm_calls"), col("direct", "vlm_calls")),
        _entry("model + tool calls per question", "calls/question", "debate",
               col("eva", "all_calls"), col("debate", "all_calls")),
        _entry("tool calls per question", "tool calls/question", "direct",
               col("eva", "tool_calls"), col("direct", "tool_calls")),
    ]  # fmt: skip
    rows = [
        ResultRow.from_values(n, k, col(n, k), hib)
        for n in NAMES
        for k, hib in (("vlm_calls", False), ("tool_calls", False), ("accuracy", True))
    ]
    claims = _claims(per, entries)
    config = {
        "vlm": "SimulatedVLM (labelled simulator, no neural network), default SimParams",
        "questions": f"ShapeTextVQA({cfg['n_test']}, seed, 'test') per seed; tau calibrated on "
        f"ShapeTextVQA({cfg['n_val']}, seed, 'val') for a {TARGET_RATE} tool-call rate",
        "seeds": list(range(cfg["seeds"])),
        "tools": "ShapeColorDetector, RapidOCRTool, TesseractTool (cached), CropZoom, Calculator",
        "per_seed": per,
        "tool_cache": {"hits": cache.hits, "misses": cache.misses},
        "cost": entries,
    }
    return Outcome(config, rows, claims, seeds=list(range(cfg["seeds"])), labels=LABELS)
