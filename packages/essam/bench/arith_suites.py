"""The toy arithmetic world's two suites: ``calibration`` (can MinimalGRPO learn here?) and
``arith_rl`` (ES, ESSAM, accelerated ESSAM and MinimalGRPO at equal rollouts and wall time)."""

from __future__ import annotations

import argparse
from typing import Any

import arith
import numpy as np

from methodkit import seed_everything
from methodkit.bench import Outcome, ResultRow, check, compare

FULL: dict[str, Any] = {
    "model": {"n_layer": 2, "n_embd": 96, "n_head": 4},
    "sft_chunk": 300,  # SFT until rl_test accuracy reaches the 20 % floor of the spec's band
    "sft_max_steps": 3000,
    "sft_max_seconds": 420,
    "band": [0.2, 0.6],
    "sft_batch": 64,
    "sft_lr": 3e-3,
    # the calibration world: after a multiplication as the last step, 65 % of the SFT targets
    # answer "so <n>", which the reward does not read (see arith.mix_formats)
    "format_mix": {"last_op": "*", "alt": " so ", "q": 0.65},
    "n_eval": 300,
    "population": 8,
    "prompts_per_iter": 16,
    "rollout_budget": 4800,
    "checkpoints": 4,
    "lr_over_sigma": 0.5,  # alpha / sigma of the ES-at-scale defaults (5e-4 / 1e-3)
    "rho": "auto",  # 0.05 * sigma * sqrt(d)
    "sigmas": [1e-3, 3e-3, 1e-2],
    # beta = 0: TRL's GRPOConfig default; dropout off as TRL's disable_dropout
    "grpo": {"G": 8, "prompts": 8, "lr": 1e-4, "beta": 0.0},
    "max_new_tokens": 40,
    "scale": "spec: N = 32, 128 prompts, >= 300 iterations; here N = 8, 16 prompts, "
    "4800 rollouts per run (1/250 of the spec's ~1.2 M ES rollouts)",
    "train_reward": "partial credit 0.5 max(0, 1 - |pred - answer| / 10), 1 if exact",
    "accuracy": "exact match of '#### <n>', greedy, 300 held-out rl_test problems",
    "phrasing": "compact (see README)",
}
QUICK: dict[str, Any] = {
    **FULL,
    "model": {"n_layer": 1, "n_embd": 32, "n_head": 2},
    "sft_chunk": 10,
    "sft_max_steps": 20,
    "sft_max_seconds": 10,
    "sft_batch": 16,
    "n_eval": 16,
    "population": 4,
    "prompts_per_iter": 4,
    "rollout_budget": 64,
    "checkpoints": 2,
    "sigmas": [1e-3, 1e-2],
    "grpo": {"G": 4, "prompts": 2, "lr": 1e-4, "beta": 0.0},
    "max_new_tokens": 16,
}
ZO = {"ES": "es", "ESSAM": "standard", "ESSAM-acc": "accelerated"}
METRICS = ("acc_rl_test", "acc_ood", "raw_rl_test", "acc_equal_time", "rollouts", "seconds")
_RUNS: dict[tuple[str, str, int], dict] = {}


def _setup(args: argparse.Namespace) -> tuple[dict, Any, dict, dict, dict]:
    cfg = dict(QUICK if args.quick else FULL)
    seed_everything(0)
    tok, data = arith.world(cfg, args.quick)
    state, fit = arith.sft_checkpoint(cfg, tok, data)
    data["start_acc"] = fit["acc_rl_test"]
    return cfg, tok, data, state, fit


def train(method: str, cfg: dict, tok: Any, data: dict, state: dict, seed: int) -> dict:
    """One method from the SFT checkpoint; cached per process (both suites share GRPO)."""
    shared = {k: v for k, v in cfg.items() if method != "GRPO" or k != "sigma_chosen"}
    key = (method, repr(sorted((k, repr(v)) for k, v in shared.items())), seed)
    if key in _RUNS:
        return _RUNS[key]
    model = arith.build_model(tok, **cfg["model"])
    model.load_state_dict(state)
    model.eval()
    if method == "GRPO":
        r = arith.run_grpo(model, tok, data, seed, cfg)
    else:
        r = arith.run_zo(model, tok, data, ZO[method], cfg["sigma_chosen"], seed, cfg)
    mx, alt = cfg["max_new_tokens"], cfg["format_mix"]["alt"]
    r["acc_rl_test"] = r["checkpoints"][-1][2]
    r["acc_ood"] = arith.accuracy(model, tok, data["ood"], mx)
    r["raw_rl_test"] = arith.raw_accuracy(model, tok, data["test"], mx, alt)
    arith.log(
        f"seed {seed} {method:9s} acc rl_test {r['acc_rl_test']:.3f} (either format "
        f"{r['raw_rl_test']:.3f}) ood {r['acc_ood']:.3f} rollouts {r['rollouts']} "
        f"{r['seconds']:.0f}s ({r['iters']} iters)"
    )
    _RUNS[key] = r
    return r


def at_time(run: dict, seconds: float) -> float:
    """Held-out accuracy at the last checkpoint reached within ``seconds`` of training."""
    return [acc for _, t, acc in run["checkpoints"] if t <= seconds + 1e-9][-1]


def calibration(args: argparse.Namespace) -> Outcome:
    cfg, tok, data, state, fit = _setup(args)
    cfg["sigma_chosen"] = 0.0  # not used by GRPO
    runs = [train("GRPO", cfg, tok, data, state, s) for s in args.seeds]
    start = fit["acc_rl_test"]
    gains = [r["acc_rl_test"] - start for r in runs]
    rows = [
        ResultRow.from_values("SFT start", "acc_rl_test", [start], True),
        ResultRow.from_values("SFT start", "raw_rl_test", [fit["raw_rl_test"]], True),
        ResultRow.from_values("GRPO", "acc_rl_test", [r["acc_rl_test"] for r in runs], True),
        ResultRow.from_values("GRPO", "raw_rl_test", [r["raw_rl_test"] for r in runs], True),
        ResultRow.from_values("GRPO", "gain_points", [100 * g for g in gains], True),
    ]
    lo, hi = cfg["band"]
    pairs = zip(args.seeds, gains, strict=True)
    per_seed = ", ".join(f"seed {s}: {100 * g:+.1f}" for s, g in pairs)
    claims = [
        check(
            "MinimalGRPO improves held-out rl_test accuracy over the SFT start by >= 5 points "
            "on every seed",
            bool(min(gains) >= 0.05),
            f"start {100 * start:.1f}%; {per_seed} points",
            inputs=[start, *gains],
        ),
        check(
            "the SFT start lies in the 20-60 % band",
            bool(lo <= start <= hi),
            f"{100 * start:.1f}%",
            inputs=[start],
        ),
    ]
    cfg.pop("sigma_chosen")
    cfg.update(_sft_config(fit))
    cfg["per_seed"] = [
        {
            "seed": s,
            "start %": round(100 * start, 2),
            "GRPO %": round(100 * r["acc_rl_test"], 2),
            "gain (points)": round(100 * g, 2),
            "GRPO either format %": round(100 * r["raw_rl_test"], 2),
        }
        for s, r, g in zip(args.seeds, runs, gains, strict=True)
    ]
    return Outcome(
        cfg,
        rows,
        claims,
        plot_metrics=["acc_rl_test", "raw_rl_test"],
        labels=_LABELS,
        extra_plots={"curves": arith.curves_plot({"GRPO": runs})},
    )


_LABELS = {
    "acc_rl_test": "held-out accuracy (exact '####' answer), fraction",
    "raw_rl_test": "held-out accuracy in either answer format, fraction",
    "acc_ood": "out-of-distribution accuracy, fraction",
    "acc_equal_time": "held-out accuracy at equal training time, fraction",
}


def _sft_config(fit: dict) -> dict:
    return {
        "n_params": fit["n_params"],
        "sft_steps": fit["steps"],
        "sft_trace": fit["trace"],
        "sft_seconds": fit["seconds"],
        "sft_acc_rl_test": fit["acc_rl_test"],
        "sft_raw_rl_test": fit["raw_rl_test"],
        "sft_acc_ood": fit["acc_ood"],
    }


def arith_rl(args: argparse.Namespace) -> Outcome:
    cfg, tok, data, state, fit = _setup(args)
    base = arith.build_model(tok, **cfg["model"])
    base.load_state_dict(state)
    base.eval()
    sigma = arith.calibrate_sigma(base, tok, data["train"][: cfg["prompts_per_iter"]], cfg)
    arith.log(f"sigma = {sigma:g}")
    cfg["sigma_chosen"] = sigma
    runs = {m: [train(m, cfg, tok, data, state, s) for s in args.seeds] for m in [*ZO, "GRPO"]}
    for k in range(len(args.seeds)):  # equal wall time: the fastest method's training time
        limit = min(runs[m][k]["seconds"] for m in runs)
        for m in runs:
            runs[m][k]["acc_equal_time"] = at_time(runs[m][k], limit)
    rows = [
        ResultRow.from_values("SFT start", metric, [fit[metric]], True)
        for metric in ("acc_rl_test", "acc_ood", "raw_rl_test")
    ]
    for m, rs in runs.items():
        for metric in METRICS:
            higher = metric.startswith(("acc", "raw")) if metric != "seconds" else False
            rows.append(ResultRow.from_values(m, metric, [r[metric] for r in rs], higher))
        rows.append(
            ResultRow.from_values(m, "s_per_iter", [r["seconds"] / r["iters"] for r in rs], False)
        )
    mean = {
        m: {k: float(np.mean([r[k] for r in rs])) for k in ("acc_rl_test", "acc_equal_time")}
        | {"s_per_iter": float(np.mean([r["seconds"] / r["iters"] for r in rs]))}
        for m, rs in runs.items()
    }
    cfg.update(_sft_config(fit))
    cfg["curves"] = {m: [r["checkpoints"] for r in rs] for m, rs in runs.items()}
    cfg["per_seed"] = [
        {
            "method": m,
            "seed": s,
            "acc_rl_test %": round(100 * r["acc_rl_test"], 2),
            "acc_equal_time %": round(100 * r["acc_equal_time"], 2),
            "either format %": round(100 * r["raw_rl_test"], 2),
            "iterations": r["iters"],
            "seconds": round(r["seconds"], 1),
        }
        for m, rs in runs.items()
        for s, r in zip(args.seeds, rs, strict=True)
    ]
    return Outcome(
        cfg,
        rows,
        accuracy_claims(mean, fit["acc_rl_test"]),
        plot_metrics=["acc_rl_test", "acc_equal_time", "raw_rl_test", "acc_ood"],
        labels=_LABELS,
        extra_plots={"curves": arith.curves_plot(runs)},
    )


def accuracy_claims(mean: dict, acc_sft: float) -> list:
    """The spec's claims (1)-(3), plus (2a) again at equal wall time (issue 45)."""
    ess, es, grpo = (mean[m]["acc_rl_test"] for m in ("ESSAM", "ES", "GRPO"))
    ess_t, es_t = mean["ESSAM"]["acc_equal_time"], mean["ES"]["acc_equal_time"]
    t_acc, t_std = mean["ESSAM-acc"]["s_per_iter"], mean["ESSAM"]["s_per_iter"]
    return [
        check(
            "(1) ESSAM improves rl_test accuracy over the SFT checkpoint by >= 3 points",
            ess - acc_sft >= 0.03,
            f"ESSAM {100 * ess:.1f}% vs SFT {100 * acc_sft:.1f}%",
            inputs=[ess, acc_sft],
            degenerate=ess == acc_sft == 0,
        ),
        compare(
            "(2a) ESSAM accuracy >= ES accuracy - 1 point at equal rollouts",
            ess,
            ">=",
            es,
            margin=-0.01,
            measured=f"ESSAM {100 * ess:.1f}% vs ES {100 * es:.1f}%",
        ),
        compare(
            "(2a, equal wall time) ESSAM accuracy >= ES accuracy - 1 point at equal training time",
            ess_t,
            ">=",
            es_t,
            margin=-0.01,
            measured=f"ESSAM {100 * ess_t:.1f}% vs ES {100 * es_t:.1f}%",
        ),
        compare(
            "(2b) accelerated ESSAM wall-clock per iteration <= 0.6x standard ESSAM's",
            t_acc,
            "<=",
            t_std,
            scale=0.6,
            measured=f"{t_acc:.2f}s vs {t_std:.2f}s (ratio {t_acc / t_std:.2f})",
        ),
        compare(
            "(3) ESSAM accuracy >= GRPO accuracy - 15 points",
            ess,
            ">=",
            grpo,
            margin=-0.15,
            measured=f"ESSAM {100 * ess:.1f}% vs GRPO {100 * grpo:.1f}%",
        ),
    ]
