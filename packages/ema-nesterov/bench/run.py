"""Reproduction of EMA-Nesterov: quadratics, byte-level LMs, step time, digits MLP.

python bench/run.py [--quick] [--seeds 0 1 2] [--threads 1]
    [--only quadratic char_lm step_time digits lm_bases lm_bases_small_beta]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from plots import plot_char_lm, plot_quadratic
from suites import beta4_claim, digits, lm_bases, lm_bases_small_beta, step_time

import methodkit
from methodkit.bench import Claim, Outcome, ResultRow, check, run_suite

PACKAGE = "ema-nesterov"


def _reference_deviation(iterations: dict[str, list[int]], reference: dict) -> tuple[float, str]:
    worst, worst_name = 0.0, ""
    for name, ref in reference.items():
        if name not in iterations:
            continue
        for it, r in zip(iterations[name], ref, strict=False):
            dev = abs(it - r) / r
            if dev > worst:
                worst, worst_name = dev, name
    return worst, worst_name


def quadratic(args: argparse.Namespace) -> Outcome:
    """Iterations to tolerance against kappa, and the noisy-gradient loss floor."""
    from tasks import QUADRATIC_REFERENCE, run_quadratic

    methodkit.seed_everything(args.seeds[0])
    q = run_quadratic(args.quick)
    kappas = q["kappas"]
    rows = [
        ResultRow.from_values(name, f"iters_kappa_{k:.0e}", [it], False)
        for name, iters in q["iterations"].items()
        for k, it in zip(kappas, iters, strict=True)
    ]
    rows += [
        ResultRow.from_values(name, "noisy_floor", floors, False)
        for name, floors in q["noisy"]["floors"].items()
    ]
    f0 = float(np.mean(q["noisy"]["floors"]["EMA gamma=0"]))
    f9 = float(np.mean(q["noisy"]["floors"]["EMA gamma=0.9"]))
    worst, worst_name = _reference_deviation(q["iterations"], QUADRATIC_REFERENCE)
    ema_slopes = {n: q["slope_" + n] for n in q["iterations"] if n.startswith("EMA")}
    claims = [
        check(
            "noisy quadratic: floor(gamma 0.9) <= 0.8 x floor(gamma 0) at the same beta 0.9",
            f9 <= 0.8 * f0,
            f"ratio {f9 / f0:.3f} ({f9:.4f} vs {f0:.4f})",
            inputs=[f9, f0],
            degenerate=f0 == 0,
        ),
        check(
            "iterations within 10% of the spec's reference counts (every gamma and GD)",
            worst <= 0.10,
            f"max deviation {100 * worst:.1f}% {worst_name}",
            inputs=[worst],
        ),
        check(
            "log-log slope of iterations vs kappa <= 0.55 for EMA-Nesterov (every gamma)",
            max(ema_slopes.values()) <= 0.55,
            ", ".join(f"{n}: {s:.3f}" for n, s in ema_slopes.items()),
            inputs=list(ema_slopes.values()),
        ),
        check(
            "log-log slope >= 0.75 for gradient descent",
            q["slope_GD"] >= 0.75,
            f"GD: {q['slope_GD']:.3f}",
            inputs=[q["slope_GD"]],
        ),
    ]
    if 1e4 in kappas:
        it = q["iterations"]["EMA gamma=0.9"][kappas.index(1e4)]
        claims.append(
            check("kappa 1e4, gamma 0.9: <= 1300 iterations", it <= 1300, f"{it}", inputs=[it])
        )
    config = {
        "d": 100,
        "kappas": kappas,
        "tol": 1e-6,
        "base": "SGD(lr=1)",
        "beta_grid": "0..0.98 step 0.02, 0.99, 0.995",
        "best_beta": q["best_beta"],
        "slopes": {k: v for k, v in q.items() if k.startswith("slope_")},
        "noisy": q["noisy"]["config"],
    }
    return Outcome(
        config, rows, claims, seeds=q["noisy"]["seeds"], extra_plots={"curves": plot_quadratic}
    )


class _LMRuns:
    """Means of the LM runs, and whether a method diverged on every seed."""

    def __init__(self, runs: dict[str, list[dict[str, Any]]]) -> None:
        self.runs = runs

    def mean(self, name: str) -> float:
        return float(np.mean([r["val_loss"] for r in self.runs[name]]))

    def all_diverged(self, *names: str) -> bool:
        """True when every named method diverged on every seed: a comparison at the floor."""
        return all(r["diverged"] for n in names for r in self.runs[n])


def _lm_rows(lm: dict[str, Any]) -> list[ResultRow]:
    runs, ov = lm["runs"], lm["overhead"]
    rows = [
        ResultRow.from_values(name, "val_loss", [r["val_loss"] for r in rs], False)
        for name, rs in runs.items()
    ]
    rows += [
        ResultRow.from_values(name, "ms_per_step", [1e3 * r["sec_per_step"] for r in rs], False)
        for name, rs in runs.items()
    ]
    rows += [
        ResultRow.from_values(f"sweep {key}", "val_loss_sweep", [val["val_loss"]])
        for key, val in lm["sweep"].items()
    ]
    rows += [
        ResultRow.from_values(n, "interleaved_step_ms", [ov[f"{n}/step_ms"]], False)
        for n in ("AdamW", "EMA-Nesterov(AdamW)", "EMA-Nesterov(AdamW, memory_efficient)")
    ]
    return rows


def _lm_quality_claims(lm: dict[str, Any]) -> list[Claim]:
    r = _LMRuns(lm["runs"])
    ema, adamw = r.mean("EMA-Nesterov(AdamW)"), r.mean("AdamW")
    both = r.all_diverged("EMA-Nesterov(AdamW)", "AdamW")
    claims = [
        check(
            "EMA-Nesterov(AdamW) <= AdamW - 0.01 val loss (paper claim, mean of seeds)",
            ema <= adamw - 0.01,
            f"{ema:.4f} vs {adamw:.4f} (diff {ema - adamw:+.4f})",
            inputs=[ema, adamw],
            degenerate=both,
        ),
        check(
            "hard floor: EMA-Nesterov(AdamW) <= AdamW + 0.005",
            ema <= adamw + 0.005,
            f"diff {ema - adamw:+.4f}",
            inputs=[ema, adamw],
            degenerate=both,
        ),
    ]
    la = r.mean("Lookahead(AdamW)")
    if "NesterovLookahead(AdamW)" in r.runs:
        nl = r.mean("NesterovLookahead(AdamW)")
        claims.append(
            check(
                "EMA-Nesterov(AdamW) <= NesterovLookahead(AdamW) and <= Lookahead(AdamW)",
                ema <= nl and ema <= la,
                f"{ema:.4f} vs NL {nl:.4f} (beta {lm['best_beta']['NesterovLookahead']:g}), "
                f"LA {la:.4f}",
                inputs=[ema, nl, la],
                degenerate=r.all_diverged(
                    "EMA-Nesterov(AdamW)", "NesterovLookahead(AdamW)", "Lookahead(AdamW)"
                ),
            )
        )
    else:
        claims.append(
            check(
                "EMA-Nesterov(AdamW) <= Lookahead(AdamW)",
                ema <= la,
                f"{ema:.4f} vs {la:.4f}",
                inputs=[ema, la],
                degenerate=r.all_diverged("EMA-Nesterov(AdamW)", "Lookahead(AdamW)"),
            )
        )
    if lm["sweep"]:
        claims.append(beta4_claim(lm["sweep"]))
    if "Muon+AdamW" in r.runs:
        em, mu = r.mean("EMA-Nesterov(Muon+AdamW)"), r.mean("Muon+AdamW")
        claims.append(
            check(
                "EMA-Nesterov(Muon) <= Muon + 0.005",
                em <= mu + 0.005,
                f"{em:.4f} vs {mu:.4f} (diff {em - mu:+.4f})",
                inputs=[em, mu],
                degenerate=r.all_diverged("EMA-Nesterov(Muon+AdamW)", "Muon+AdamW"),
            )
        )
    return claims


def _lm_cost_claims(ov: dict[str, float]) -> list[Claim]:
    base_ms = ov["AdamW/step_ms"]
    r2 = ov["EMA-Nesterov(AdamW)/step_ms"] / base_ms
    r1 = ov["EMA-Nesterov(AdamW, memory_efficient)/step_ms"] / base_ms
    ro = ov["EMA-Nesterov(AdamW)/opt_step_ms"] / ov["AdamW/opt_step_ms"]
    extra2 = ov["EMA-Nesterov(AdamW)/state_per_param"] - ov["AdamW/state_per_param"]
    extra1 = (
        ov["EMA-Nesterov(AdamW, memory_efficient)/state_per_param"] - ov["AdamW/state_per_param"]
    )
    return [
        check(
            "training-step time <= 1.15 x AdamW (interleaved, same process, median)",
            max(r1, r2) <= 1.15,
            f"{r2:.3f}x two buffers, {r1:.3f}x memory_efficient (optimizer.step alone {ro:.2f}x)",
            inputs=[r2, r1],
        ),
        check(
            "extra optimizer memory: 2 buffers (memory_efficient=False), 1 (memory_efficient)",
            abs(extra2 - 2) < 1e-9 and abs(extra1 - 1) < 1e-9,
            f"{extra2:g} and {extra1:g} parameter-sized buffers",
            inputs=[extra2, extra1],
        ),
    ]


def char_lm(args: argparse.Namespace) -> Outcome:
    """Byte-level TinyGPT: beta sweep, every optimizer on the seeds, interleaved step time."""
    from tasks import run_lm

    methodkit.seed_everything(args.seeds[0])
    lm = run_lm(args.seeds, args.quick)
    runs = lm["runs"]
    claims = _lm_quality_claims(lm) + _lm_cost_claims(lm["overhead"])
    config = {
        **lm["config"],
        "corpus": lm["corpus"],
        "best_beta": lm["best_beta"],
        "sweep": lm["sweep"],
        "n_params": int(runs["AdamW"][0]["param_bytes"] // 4),
        "overhead": lm["overhead"],
        "curves": {
            n: {"steps": rs[0]["curve_steps"], "val_loss": [r["curve_val_loss"] for r in rs]}
            for n, rs in runs.items()
        },
    }
    return Outcome(
        config,
        _lm_rows(lm),
        claims,
        plot_metrics=["val_loss", "interleaved_step_ms"],
        units={"val_loss": "nats/byte", "interleaved_step_ms": "ms"},
        extra_plots={"curves": plot_char_lm},
    )


def main(argv: list[str] | None = None) -> int:
    """Run the selected benchmarks (default: both) and return the exit code."""
    suites = {"quadratic": quadratic, "char_lm": char_lm, "step_time": step_time}
    return run_suite(
        PACKAGE,
        {
            **suites,
            "digits": digits,
            "lm_bases": lm_bases,
            "lm_bases_small_beta": lm_bases_small_beta,
        },
        argv,
        add_arguments=_add_workers,
    )


def _add_workers(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="lm_bases: single-threaded training processes at once (default 1)",
    )


if __name__ == "__main__":
    sys.exit(main())
