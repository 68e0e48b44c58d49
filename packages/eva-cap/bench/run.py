"""eva-cap reproduction: SFT-raw, SFT-QC and GRPO variants on the procedural AV world.

A tiny encoder-decoder captioner is trained from scratch in the run: SFT on web captions
(raw, or after event-centric quality control), then GRPO from SFT-QC with the gated event
reward, a text-overlap reward, single event rewards, or no KL. Greedy decoding on held-out
clips, scored against their gold events.

    python bench/run.py [--quick] [--seeds 0 1 2] [--threads 1] [--only main ablations]

The protocol is scaled by 1/5 in both stages (SFT 1320 of 6600 steps, GRPO 420 of 2100): see
``tasks.FULL``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import tasks
from cost import cost
from tasks import HIB, METRICS, SPEC

from eva_cap import evaluate_captions
from methodkit.bench import Outcome, ResultRow, check, compare, run_suite

PACKAGE = "eva-cap"


def _rows(vals: dict[str, dict[str, list[float]]]) -> list[ResultRow]:
    return [ResultRow.from_values(m, k, v, HIB.get(k, True))
            for m, d in vals.items() for k, v in d.items()]  # fmt: skip


def _add(vals: dict, method: str, metrics: dict[str, float]) -> None:
    for k, v in metrics.items():  # a NaN (e.g. no clip with two matched events) is not a value
        if (k in METRICS or k in HIB) and np.isfinite(v):
            vals.setdefault(method, {}).setdefault(k, []).append(float(v))


def _config(sc: tasks.Scale, extra: dict | None = None) -> dict:
    return {"n_train_clips": sc.n_train, "n_test_clips": sc.n_test, "sft_steps": sc.sft_steps,
            "grpo_steps": sc.grpo_steps, "sft_batch": sc.sft_batch, "sft_lr": 2e-3,
            "clips_per_grpo_step": sc.clips_per_step, "G": sc.G, "grpo_lr": 1e-4, "beta": 0.04,
            "epsilon": 0.2, "decoding": "greedy", "model": "TinyAVCaptioner d=64, 2+2 layers",
            "scale_factor": {"sft": f"{sc.sft_steps}/{SPEC['sft_steps']}",
                             "grpo": f"{sc.grpo_steps}/{SPEC['grpo_steps']}",
                             "both": round(sc.sft_steps / SPEC["sft_steps"], 3)},
            **(extra or {})}  # fmt: skip


def main_claim(args: argparse.Namespace) -> Outcome:
    """(a): GRPO with the three event rewards vs SFT-QC, every seed."""
    sc = tasks.scale(args.quick)
    vals: dict = {}
    for seed in args.seeds:
        _, test = tasks.world(seed, sc)
        _add(vals, "web captions", evaluate_captions(test["web"], test["gold_events"],
                                                     references=test["reference"]))  # fmt: skip
        m, info = tasks.sft(seed, sc, qc=True)
        _add(vals, "SFT-QC", {**tasks.evaluate(m, test), "train_s": info["train_s"]})
        m, info = tasks.grpo(seed, sc, "GRPO-event")
        _add(vals, "GRPO-event", {**tasks.evaluate(m, test), **info})
    s, g = vals["SFT-QC"], vals["GRPO-event"]
    d = {k: np.array(g[k]) - np.array(s[k]) for k in ("mean_event_score", "attribution", "sync")}
    mean_d = float(d["mean_event_score"].mean())
    parse, ratio = float(np.mean(g["parse_rate"])), float(np.mean(g["length_ratio"]))
    claims = [
        compare("GRPO-event mean event score >= SFT-QC + 0.10 (seed mean)",
                float(np.mean(g["mean_event_score"])), ">=",
                float(np.mean(s["mean_event_score"])), margin=0.10,
                measured=f"delta {mean_d:+.3f}"),
        check("every seed: GRPO-event mean event score >= SFT-QC + 0.05",
              bool(np.all(d["mean_event_score"] >= 0.05)),
              "deltas " + ", ".join(f"{x:+.3f}" for x in d["mean_event_score"]),
              inputs=list(d["mean_event_score"])),
        check("attribution and sync each improve by >= 0.08 (seed mean)",
              bool(d["attribution"].mean() >= 0.08 and d["sync"].mean() >= 0.08),
              f"attribution {d['attribution'].mean():+.3f}, sync {d['sync'].mean():+.3f}",
              inputs=[d["attribution"].mean(), d["sync"].mean()]),
        check("GRPO-event parse rate >= 0.95", parse >= 0.95, f"{parse:.3f}", inputs=[parse]),
        check("no length hacking: GRPO-event words within +-30 % of the reference captions'",
              abs(ratio - 1) <= 0.30, f"ratio {ratio:.3f}", inputs=[ratio]),
    ]  # fmt: skip
    cfg = _config(sc, {"room": "SFT-QC attribution / sync below 1 leave room (see rows)",
                       "delta_mean_event_score": d["mean_event_score"].tolist()})  # fmt: skip
    return Outcome(cfg, _rows(vals), claims, plot_metrics=["mean_event_score", "event_f1",
                                                           "attribution", "sync"])  # fmt: skip


ABLATIONS = {"GRPO-comp": "event_f1", "GRPO-attr": "attribution", "GRPO-sync": "sync"}


def ablations(args: argparse.Namespace) -> Outcome:
    """(b)-(d) on the first seed: single rewards, SFT-raw, GRPO-text, GRPO-noKL."""
    sc, seed = tasks.scale(args.quick), args.seeds[0]
    _, test = tasks.world(seed, sc)
    vals: dict = {}
    for qc, name in ((True, "SFT-QC"), (False, "SFT-raw")):
        m, info = tasks.sft(seed, sc, qc)
        _add(vals, name, {**tasks.evaluate(m, test), "train_s": info["train_s"]})
    for variant in ("GRPO-event", *ABLATIONS, "GRPO-text", "GRPO-noKL"):
        m, info = tasks.grpo(seed, sc, variant)
        _add(vals, variant, {**tasks.evaluate(m, test), **info})
    claims = [
        compare(f"{v} improves its own metric ({k}) over SFT-QC", vals[v][k][0], ">",
                vals["SFT-QC"][k][0])
        for v, k in ABLATIONS.items()
    ]  # fmt: skip
    plots = ["mean_event_score", "event_f1", "attribution", "sync"]
    return Outcome(_config(sc, {"seed": seed}), _rows(vals), claims, seeds=[seed],
                   plot_metrics=plots)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return run_suite(PACKAGE, {"main": main_claim, "ablations": ablations, "cost": cost}, argv)


if __name__ == "__main__":
    sys.exit(main())
