"""Helpers of bench/run.py (script code, not in the wheel): tools, methods, one seed's run."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from eva_agent import EVAgent, ThresholdRouter, calibrate_tau
from eva_agent.baselines import AlwaysTool, Debate, Direct, NoVerify, SelfReflect, SingleShotTool
from eva_agent.metrics import (
    accuracy_by_type,
    evidence_consistency,
    hallucination_rate,
    is_correct,
    tool_call_rate,
)
from eva_agent.tools import (
    Calculator,
    CropZoom,
    RapidOCRTool,
    ShapeColorDetector,
    TesseractTool,
    ToolCache,
)
from eva_agent.vlm import SimParams, SimulatedVLM
from eva_agent.world import ShapeTextVQA

TARGET_RATE = 0.6  # tool-call rate tau is calibrated for on the validation split (spec)


class SwappedTool:
    """Runs a tool on another scene's image: the swapped-evidence control."""

    def __init__(self, tool: Any, donor: dict[str, Any]) -> None:
        self.tool, self.donor = tool, donor
        self.name, self.kind, self.schema = tool.name, tool.kind, tool.schema

    def __call__(self, image: Any, **args: Any) -> Any:
        return self.tool(self.donor[image.info["eva_scene"]["id"]], **args)


def make_tools(cache: ToolCache) -> list[Any]:
    """The real offline tools, OCR and detection behind the cache."""
    with_cache = [ShapeColorDetector(), RapidOCRTool(), TesseractTool()]
    return [cache.wrap(t) for t in with_cache] + [CropZoom(), Calculator()]


def run_all(method: Any, items: list) -> tuple[list, float]:
    t0 = time.perf_counter()
    out = [method.run(it.image, it.question, it.qtype) for it in items]
    return out, time.perf_counter() - t0


def one_seed(
    seed: int, n_test: int, n_val: int, params: SimParams, cache: ToolCache, difficulty: float = 0.5
) -> dict[str, Any]:
    """Every method on one seed's test split; tau calibrated on its validation split."""
    test = list(ShapeTextVQA(n_test, seed=seed, split="test", difficulty=difficulty))
    val = list(ShapeTextVQA(n_val, seed=seed, split="val", difficulty=difficulty))
    vlm = SimulatedVLM(params, seed=seed)
    tools = make_tools(cache)
    probe = ThresholdRouter(0.5)
    fast = [vlm.answer(it.image, it.question) for it in val]
    risks = [probe.risk(c, it.qtype, answer=a) for (a, c), it in zip(fast, val, strict=True)]
    tau = calibrate_tau(risks, TARGET_RATE)
    val_rate = float(np.mean(np.asarray(risks) > tau))
    router = ThresholdRouter(tau)
    scenes = sorted({it.image.info["eva_scene"]["id"]: it.image for it in test}.items())
    donor = {sid: scenes[(k + 1) % len(scenes)][1] for k, (sid, _) in enumerate(scenes)}
    swapped = [SwappedTool(t, donor) if t.kind in ("ocr", "detect") else t for t in tools]
    methods = {
        "direct": Direct(vlm),
        "self_reflect": SelfReflect(vlm, rounds=1),
        "debate": Debate(vlm, n_agents=3, rounds=2),
        "eva": EVAgent(vlm, tools, router),
        "always_tool": AlwaysTool(vlm, tools),
        "single_shot_tool": SingleShotTool(vlm, tools, router),
        "no_verify": NoVerify(vlm, tools, router),
        "eva_swapped_evidence": EVAgent(vlm, swapped, router),
    }
    res, secs = {}, {}
    for name, m in methods.items():
        res[name], secs[name] = run_all(m, test)
    out: dict[str, Any] = {"tau": tau, "val_tool_rate": val_rate, "n_test": len(test)}
    for name, rs in res.items():
        acc = accuracy_by_type(test, rs)
        rr = [is_correct(r.answer, it.answer, it.qtype) for it, r in zip(test, rs, strict=True)]
        out[name] = {
            **{f"acc_{k}": v for k, v in acc.items()},
            "acc_read_count": float(
                np.mean(
                    [c for c, it in zip(rr, test, strict=True) if it.qtype in ("read", "count")]
                )
            ),
            "hallucination": hallucination_rate(test, rs),
            "tool_call_rate": tool_call_rate(rs),
            "tool_calls": float(np.mean([r.n_tool_calls for r in rs])),
            "vlm_calls": float(np.mean([r.n_vlm_calls for r in rs])),
            "ms_per_q": 1000 * secs[name] / len(test),
        }
        if name in ("eva", "always_tool", "no_verify", "single_shot_tool"):
            out[name]["consistency"], out[name]["n_verifiable"] = evidence_consistency(test, rs)
    ledgers = [r.ledger for r in res["always_tool"]]
    out["direct"]["consistency"], out["direct"]["n_verifiable"] = evidence_consistency(
        test, res["direct"], ledgers
    )
    p = out["eva"]["tool_call_rate"]  # coin-flip routing at EVA's rate: its exact expectation
    d_ok = np.array(
        [
            is_correct(r.answer, it.answer, it.qtype)
            for it, r in zip(test, res["direct"], strict=True)
        ]
    )
    a_ok = np.array(
        [
            is_correct(r.answer, it.answer, it.qtype)
            for it, r in zip(test, res["always_tool"], strict=True)
        ]
    )
    out["random_routing"] = {
        "acc_overall": float((1 - p) * d_ok.mean() + p * a_ok.mean()),
        "tool_call_rate": p,
    }
    return out


def mean_over(per_seed: list[dict], method: str, metric: str) -> float:
    vals = [s[method][metric] for s in per_seed if metric in s[method]]
    return float(np.mean(vals)) if vals else float("nan")


class EvidencePlanner:
    """Plans with the noise-free simulator, answers with a text model: the SmolLM2 run."""

    def __init__(self, reasoner: Any, seed: int) -> None:
        self.reasoner = reasoner
        self.planner = SimulatedVLM(SimParams.perfect(), seed=seed)

    def answer(
        self, image: Any, question: str, evidence: Any = None, *, hints: Any = None, sample: int = 0
    ) -> tuple[str, float]:
        return self.reasoner.answer(None, question, evidence, hints=hints)

    def plan(self, *a: Any, **k: Any) -> Any:
        return self.planner.plan(*a, **k)

    def judge(self, *a: Any) -> str:
        return self.reasoner.judge(*a)


class ScriptedReasoner:
    """Stand-in for SmolLM2 in --quick: reads the evidence's own answer (no model)."""

    def __init__(self) -> None:
        self.n_generated = 0

    def answer(
        self, image: Any, question: str, evidence: Any = None, *, hints: Any = None, sample: int = 0
    ) -> tuple[str, float]:
        from eva_agent._vocab import infer_qtype
        from eva_agent.verify import evidence_answer

        ev = evidence_answer(question, infer_qtype(question), list(evidence or []))
        return (ev[0], ev[1]) if ev else ("unknown", 0.0)

    def judge(self, *a: Any) -> str:
        return "confident"
