"""PreG reproduction: arithmetic-chain world with a tiny char LM, plus the path simulator.

    make bench PKG=preg                                  # full run (3 seeds), from the repo root
    python bench/run.py --quick --seeds 0                # smoke run (< 40 s), from packages/preg
    python bench/run.py --seeds 0 --train-steps 2000     # supplementary: arith_toy_steps2000
    python bench/run.py --only smollm2_arith             # the real model alone (~25 min)

Writes ``arith_toy`` (accuracy vs generated characters for every method, on one shared sample
pool per seed, replayed) and ``simulator`` (gain over equal-budget SC vs question difficulty)
and ``smollm2_arith`` (SmolLM2-135M-Instruct on word problems, ``real.py``) into the package's
``bench/results`` (or ``--out``). One seed of each toy benchmark is in ``tasks.py``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import plots
import real
import tasks
import torch
from tasks import BETA, MAX_NEW

from methodkit.bench import Claim, Outcome, ResultRow, check, compare, run_suite

PACKAGE = "preg"


def _row(method: str, metric: str, values: list[float], hib: bool) -> list[ResultRow]:
    vals = [float(v) for v in values if np.isfinite(v)]
    return [ResultRow.from_values(method, metric, vals, hib)] if vals else []


def _nanmean(values: list[float]) -> float:
    return float(np.nanmean(values)) if not np.all(np.isnan(values)) else float("nan")


# ----------------------------------------------------------------------------- arith_toy
def arith_toy(args: argparse.Namespace) -> Outcome:
    """Every method replayed on one pool per seed; claims on AUROC, cost and the band gain."""
    cfg, ms, preg_grid = tasks.toy_grid(args.quick)
    if args.train_steps is not None:
        cfg["train_steps"] = args.train_steps
    cfg.update(max_new_tokens=MAX_NEW, beta=BETA, temperature=1.0, score="logprob mean")
    head = (16, 4, 16) if (16, 4, 16) in preg_grid else preg_grid[0]
    methods = tasks.toy_methods(ms, preg_grid, cfg["pool"])
    cache = Path(args.out) / "scratch_cache"
    per_seed = [tasks.toy_seed(seed, cfg, methods, head, cache) for seed in args.seeds]
    names = list(per_seed[0]["res"])
    acc, chars, rows = tasks.accuracy_cost_rows(per_seed, "generated_chars")
    for key in per_seed[0]["auroc"]:
        aurocs = [s["auroc"][key] for s in per_seed]
        rows += _row(f"AUROC {key}", "within_question_auroc", aurocs, True)
    mean = {n: float(np.mean(acc[n])) for n in names}
    mchars = {n: float(np.mean(chars[n])) for n in names}
    hname = f"PreG N{head[0]} K{head[1]} L{head[2]}"
    claims = [
        _auroc_claim(per_seed),
        *_cost_claims(names, mean, mchars, ms),
        *_equal_cost_claims(per_seed, hname, mean, mchars, ms),
        _live_claim(per_seed, hname),
    ]
    psa = [s["psa"] for s in per_seed]
    cfg["per_sample_accuracy_mean"] = float(np.mean([p.mean() for p in psa]))
    cfg["per_sample_accuracy_quartiles"] = [
        float(x) for x in np.quantile(np.concatenate(psa), [0.25, 0.5, 0.75])
    ]
    cfg["headline_preg"] = hname
    cfg["torch_threads"] = torch.get_num_threads()
    aurocs = any(r.metric == "within_question_auroc" for r in rows)
    return Outcome(
        cfg,
        rows,
        claims,
        plot_metrics=["within_question_auroc"] if aurocs else ["accuracy"],
        units={"accuracy": "fraction"},
        extra_plots={"curves": plots.toy_curves},
    )


def _auroc_claim(per_seed: list[dict[str, Any]]) -> Claim:
    au = float(np.mean([s["auroc"]["L16"] for s in per_seed]))
    other = {k: np.mean([s["auroc"][k] for s in per_seed]) for k in ("L8", "full", "L16_negent")}
    return check(
        "within-question prefix log-prob AUROC at prefix 16 >= 0.62",
        au >= 0.62,
        f"AUROC L16 {au:.3f} (L8 {other['L8']:.3f}, full {other['full']:.3f}, neg-entropy"
        f" L16 {other['L16_negent']:.3f})",
        inputs=[au],
    )


def _cost_claims(
    names: list[str], mean: dict[str, float], mchars: dict[str, float], ms: list[int]
) -> list[Claim]:
    pregs = [n for n in names if n.startswith("PreG")]
    top = max(ms)
    mid = 16 if 16 in ms else ms[len(ms) // 2]
    sc_mid, sc_top = f"SC@{mid}", f"SC@{top}"
    cheap = [n for n in pregs if mchars[n] <= mchars[sc_mid]]
    best = max(cheap, key=lambda n: mean[n]) if cheap else None
    b_acc = mean[best] if best else float("nan")
    reach = [n for n in pregs if mean[n] >= mean[sc_top]]
    cheapest = min(reach, key=lambda n: mchars[n]) if reach else None
    ratio = mchars[cheapest] / mchars[sc_top] if cheapest else float("inf")
    return [
        compare(  # no PreG within the budget: nothing measured
            f"best PreG within SC@{mid}'s characters >= SC-majority@{mid} + 0.04",
            b_acc,
            ">=",
            mean[sc_mid],
            margin=0.04,
            measured=f"{best}: {b_acc:.3f} ({mchars[best]:.0f} chars) vs SC@{mid} "
            f"{mean[sc_mid]:.3f} ({mchars[sc_mid]:.0f} chars)"
            if best
            else "none",
        ),
        check(  # no PreG reaching SC is a failure; SC at accuracy 0 is reached by anything
            f"PreG reaches SC-majority@{top} accuracy with <= 0.4x its characters",
            ratio <= 0.4,
            f"SC@{top} {mean[sc_top]:.3f} at {mchars[sc_top]:.0f} chars; "
            + (
                f"{cheapest} {mean[cheapest]:.3f} at ratio {ratio:.2f}"
                if cheapest
                else "no PreG config reaches it"
            ),
            inputs=[mean[sc_top], mchars[sc_top], *([ratio] if cheapest else [])],
            degenerate=mean[sc_top] == 0,
        ),
    ]


def _equal_cost_claims(
    per_seed: list[dict[str, Any]],
    hname: str,
    mean: dict[str, float],
    mchars: dict[str, float],
    ms: list[int],
) -> list[Claim]:
    cw, gains_b, gains_o, scq = [], [], [], []
    for s in per_seed:
        m_eq = s["res"][hname].mean_tokens / s["mean_len"]
        cw_curve = np.array([s["res"][f"cwSC@{m}"].accuracy for m in ms])
        cw.append(float(tasks.interp(ms, cw_curve, m_eq)))
        sc_curve = np.array([s["res"][f"SC@{m}"].accuracy for m in ms])
        scq.append(float(tasks.interp(ms, sc_curve, m_eq)))
        per_q = np.stack([s["res"][f"SC@{m}"].per_question for m in ms], axis=-1)
        gain = s["res"][hname].per_question - tasks.interp(ms, per_q, m_eq)
        band = (s["psa"] >= 0.25) & (s["psa"] < 0.6)
        gains_b.append(float(gain[band].mean()) if band.any() else float("nan"))
        gains_o.append(float(gain[~band].mean()) if (~band).any() else float("nan"))
    m_eq = mchars[hname] / np.mean([s["mean_len"] for s in per_seed])
    gb, go = _nanmean(gains_b), _nanmean(gains_o)
    share = np.mean([((s["psa"] >= 0.25) & (s["psa"] < 0.6)).mean() for s in per_seed])
    return [
        compare(
            f"{hname} >= confidence-weighted SC (beta={BETA:g}) + 0.02 at equal cost",
            mean[hname],
            ">=",
            float(np.mean(cw)),
            margin=0.02,
            measured=f"{mean[hname]:.3f} vs cwSC {np.mean(cw):.3f} (majority SC "
            f"{np.mean(scq):.3f}) at M_eq = {m_eq:.1f}",
        ),
        check(  # no question in (or out of) the band, or no gain anywhere: nothing to compare
            "gain over equal-cost SC on questions with per-sample accuracy in [0.25, 0.6)"
            " >= 1.5x the gain elsewhere",
            gb > 0 and gb >= 1.5 * go,
            f"band {gb:+.3f}, other {go:+.3f} (band share {share:.2f})",
            inputs=[gb, go],
            degenerate=gb == go == 0,
        ),
    ]


def _live_claim(per_seed: list[dict[str, Any]], hname: str) -> Claim:
    # Live and replay both at accuracy 0 (an untrained quick-run model) agree without telling
    # anything: "not measured" unless some seed has a non-zero accuracy.
    ok = all(s["ci"][0] <= s["replay_live"] <= s["ci"][1] for s in per_seed)
    return check(
        f"live {hname} matches its replay accuracy (bootstrap 95% CI)",
        ok,
        "; ".join(
            f"live {s['live']:.3f} CI [{s['ci'][0]:.3f}, {s['ci'][1]:.3f}] "
            f"replay {s['replay_live']:.3f}"
            for s in per_seed
        ),
        inputs=[x for s in per_seed for x in (s["live"], s["replay_live"], *s["ci"])],
        degenerate=all(s["live"] == s["replay_live"] == 0 for s in per_seed),
    )


# ----------------------------------------------------------------------------- simulator
def simulator(args: argparse.Namespace) -> Outcome:
    """Gain of PreG over equal-budget SC by question difficulty, and with no prefix signal."""
    nq, reps = (150, 3) if args.quick else (300, 5)
    bins = np.linspace(0.0, 1.0, 11)
    per_seed = [tasks.sim_seed(seed, nq, reps, bins) for seed in args.seeds]
    gain = [s["gain"] for s in per_seed]
    gain_null = [s["gain_null"] for s in per_seed]
    by_bin = np.array([s["gain_by_bin"] for s in per_seed])
    gbb = np.nanmean(by_bin, axis=0)
    rows = [
        ResultRow.from_values(
            "PreG N32 K8 L8 - SC@14 (delta_prefix 0.5)", "accuracy_gain", gain, True
        ),
        ResultRow.from_values(
            "PreG N32 K8 L8 - SC@14 (delta_prefix 0)", "accuracy_gain", gain_null, True
        ),
    ]
    for b in range(10):
        vals = [v[b] for v in by_bin if not np.isnan(v[b])]
        if vals:
            label = f"gain | p in [{bins[b]:.1f}, {bins[b + 1]:.1f})"
            rows.append(ResultRow.from_values(label, "accuracy_gain", vals, True))
    peak = float((bins[:-1] + 0.05)[int(np.nanargmax(gbb))])
    null = float(np.mean(gain_null))
    claims = [
        check(  # PreG equal to SC in every bin has no peak
            "simulator: gain over equal-budget SC peaks for p in [0.3, 0.6]",
            0.3 <= peak <= 0.6,
            f"peak bin centre {peak:.2f}; gains by bin " + ", ".join(f"{x:+.3f}" for x in gbb),
            inputs=[peak, float(np.nanmax(gbb))],
            degenerate=bool(np.all(gbb[np.isfinite(gbb)] == 0)),
        ),
        check(  # both at accuracy 0 tie without telling anything
            "simulator: with delta_prefix = 0 PreG is no better than SC (gain <= 0.01)",
            null <= 0.01,
            f"gain {null:+.3f}",
            inputs=[null],
            degenerate=all(s["null_accuracy"] == (0.0, 0.0) for s in per_seed),
        ),
    ]
    cfg = {
        "questions": nq,
        "pool": 64,
        "resamples": reps,
        "delta_full": 1.0,
        "n_wrong": 4,
        "difficulty": "Beta(2,2)",
        "preg": "N=32, K=8, L=8 of 32 tokens, uniform vote",
        "sc": "M = 14 (equal budget, l = 0.25)",
    }
    return Outcome(cfg, rows, claims, units={"accuracy_gain": "accuracy"})


def _add_train_steps(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--train-steps",
        type=int,
        default=None,
        help="supplementary run: train the toy model this long (spec: 800); "
        "writes arith_toy_steps<N> and skips the simulator",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the simulator and the arithmetic world (or only the supplementary run)."""
    pre = argparse.ArgumentParser(add_help=False)
    _add_train_steps(pre)
    steps = pre.parse_known_args(argv)[0].train_steps
    benchmarks = {
        "simulator": simulator,
        "arith_toy": arith_toy,
        "smollm2_arith": real.smollm2_arith,
    }
    if steps is not None:  # supplementary: never overwrite the spec records
        benchmarks = {f"arith_toy_steps{steps}": arith_toy}
    return run_suite(
        PACKAGE,
        benchmarks,
        argv,
        description=__doc__.splitlines()[0],
        add_arguments=_add_train_steps,
    )


if __name__ == "__main__":
    raise SystemExit(main())
