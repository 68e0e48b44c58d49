"""Outcomes of the step-time, digits and multi-base LM benchmarks (bench/run.py names them)."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from plots import plot_char_lm

import methodkit
from methodkit.bench import Claim, Outcome, ResultRow, check, compare

STEP_MODELS = ("mlp", "transformer")
STEP_IMPLS = ("fused", "foreach", "SGD")
#: (base's name in the runs, metric key, words on the plot's axis)
BASES = (
    ("AdamW(fused)", "adamw_fused", "AdamW fused"),
    ("AdamW(foreach)", "adamw_foreach", "AdamW foreach"),
    ("SGD(momentum, foreach)", "sgd", "SGD momentum"),
)


def _designs(impl: str) -> dict[str, str]:
    """Short design names (the plot's labels) -> the runs' names, for one base."""
    return {
        "default": f"EMA-Nesterov({impl})",
        "two buffers": f"EMA-Nesterov({impl}), two buffers",
        "fold carried": f"EMA-Nesterov({impl}), fold carried across steps",
        "floor": f"{impl} + one pass over p and m (floor)",
    }


def _step_claims(label: str, runs: dict[str, Any]) -> list[Claim]:
    """Per AdamW implementation: the default mode and the carried fold against 1.5 x base."""
    claims = []
    for impl in ("fused", "foreach"):
        name = f"AdamW({impl})"
        base = runs[name]["median_ms"]
        floor = runs[f"{name} + one pass over p and m (floor)"]["median_ms"] / base
        for design, suffix in (
            ("default mode", ""),
            ("fold carried", ", fold carried across steps"),
        ):
            ours = runs[f"EMA-Nesterov({name}){suffix}"]["median_ms"]
            claims.append(
                compare(
                    f"{label}: step time <= 1.5 x {name}'s own step ({design}, median)",
                    ours,
                    "<=",
                    base,
                    scale=1.5,
                    measured=f"{ours / base:.2f}x ({ours:.1f} vs {base:.1f} ms; "
                    f"one-pass floor {floor:.2f}x)",
                )
            )
    return claims


def step_time(args: argparse.Namespace) -> Outcome:
    """Median optimizer.step() time, wrapper designs vs base: MLP 4.9M and transformer 20M."""
    from steptime import QUICK_TRANSFORMER, QUICK_WIDTHS, WIDTHS, measure_step_time

    steps = 3 if args.quick else 40
    rows, claims, config = [], [], {"timed_steps": steps}
    labels: dict[str, str] = {}
    for model in STEP_MODELS:
        r = measure_step_time(
            steps=steps,
            widths=QUICK_WIDTHS if args.quick else WIDTHS,
            model=model,
            transformer=QUICK_TRANSFORMER if args.quick else None,
            impls=STEP_IMPLS,
        )
        label = f"{model} {r['n_params'] / 1e6:.1f}M"
        runs = r["runs"]
        rows += [
            ResultRow.from_values(f"{label}: {n}", "step_ms", v["step_ms"], False)
            for n, v in runs.items()
        ]
        for impl, key, words in BASES:
            base = runs[impl]["median_ms"]
            metric = f"ratio_{model}_{key}"
            labels[metric] = f"{label}, {words}:\nstep time / base step time"
            rows += [
                ResultRow.from_values(design, metric, [runs[name]["median_ms"] / base], False)
                for design, name in _designs(impl).items()
            ]
        rows += [
            ResultRow.from_values(
                f"{label}: {n}", "state_tensors_per_param", [v["state_tensors"]], False
            )
            for n, v in runs.items()
            if not n.endswith("(floor)")
        ]
        claims += _step_claims(label, runs)
        config[model] = {k: v for k, v in r.items() if k != "runs"}
    n_ours = runs["EMA-Nesterov(AdamW(fused))"]["state_tensors"]
    n_base = runs["AdamW(fused)"]["state_tensors"]
    claims.append(
        check(
            "default mode keeps one state tensor per parameter beyond the base's",
            n_ours - n_base == 1,
            f"{n_ours} vs AdamW's {n_base}",
            inputs=[n_ours, n_base],
        )
    )
    return Outcome(
        config,
        rows,
        claims,
        units={"step_ms": "ms"},
        plot_metrics=list(labels),
        labels=labels,
    )


def digits(args: argparse.Namespace) -> Outcome:
    """Digits MLP: the wrapper's defaults and the momentum-matched beta against the bare base."""
    from digits import run_digits

    methodkit.seed_everything(args.seeds[0])
    r = run_digits(list(args.seeds), args.quick)
    acc = r["accuracy"]
    rows = [ResultRow.from_values(k, "test_accuracy", v, True) for k, v in acc.items()]
    claims = []
    for base, beta in r["matched_beta"].items():
        ref = float(np.mean(acc[f"{base}/base"]))
        for kind, label in (("default", "defaults (beta 1)"), ("matched", f"beta {beta:.3f}")):
            claims.append(
                compare(
                    f"{base}: EMA-Nesterov with {label} >= bare base accuracy (mean of seeds)",
                    float(np.mean(acc[f"{base}/{kind}"])),
                    ">=",
                    ref,
                )
            )
    config = {**r["config"], "matched_beta": r["matched_beta"]}
    return Outcome(config, rows, claims, plot_metrics=["test_accuracy"])


def _mean(runs: dict[str, list[dict[str, Any]]], name: str) -> float:
    return float(np.mean([x["val_loss"] for x in runs[name]]))


def _all_diverged(runs: dict[str, list[dict[str, Any]]], *names: str) -> bool:
    return all(x["diverged"] for n in names for x in runs[n])


def beta4_claim(sweep: dict[str, dict[str, Any]]) -> Claim:
    """The spec's stability claim at beta 4, from a sweep keyed ``gamma=G,beta=B``.

    Stricter than the literal wording: if gamma 0.9 diverges as well, the comparison does not
    show that the EMA stabilises the lookahead, so the claim counts as failed.
    """
    g0, g9 = sweep["gamma=0,beta=4"], sweep["gamma=0.9,beta=4"]

    def tag(run: dict[str, Any]) -> str:
        return f"{run['val_loss']:.4f}{' (diverged)' if run['diverged'] else ''}"

    return check(
        "beta 4: gamma 0 >= 0.02 worse than gamma 0.9 or diverges, while gamma 0.9 "
        "does not diverge (sweep, seed 0)",
        not g9["diverged"] and (g0["diverged"] or g0["val_loss"] >= g9["val_loss"] + 0.02),
        f"gamma 0: {tag(g0)}, gamma 0.9: {tag(g9)}",
        inputs=[g0["val_loss"], g9["val_loss"]],
    )


def _lm_bases_claims(r: dict[str, Any]) -> list[Claim]:
    """The spec's LM claims, on each base, against the peers, and the beta-4 stability."""
    runs = r["runs"]
    claims = []
    ema, adamw = _mean(runs, "EMA-Nesterov(AdamW)"), _mean(runs, "AdamW")
    for label, margin in (("(paper claim)", -0.01), ("(hard floor)", 0.005)):
        claims.append(
            check(
                f"EMA-Nesterov(AdamW) <= AdamW {margin:+g} val loss {label}, mean of seeds",
                ema <= adamw + margin,
                f"{ema:.4f} vs {adamw:.4f} (diff {ema - adamw:+.4f})",
                inputs=[ema, adamw],
                degenerate=_all_diverged(runs, "EMA-Nesterov(AdamW)", "AdamW"),
            )
        )
    for base in ("Muon", "SOAP"):
        if base in runs:
            ours, ref = _mean(runs, f"EMA-Nesterov({base})"), _mean(runs, base)
            claims.append(
                check(
                    f"EMA-Nesterov({base}) <= {base} + 0.005 val loss, mean of seeds",
                    ours <= ref + 0.005,
                    f"{ours:.4f} vs {ref:.4f} (diff {ours - ref:+.4f})",
                    inputs=[ours, ref],
                    degenerate=_all_diverged(runs, f"EMA-Nesterov({base})", base),
                )
            )
    for peer in ("NesterovLookahead(AdamW)", "ScheduleFree(AdamW)"):
        if peer in runs:
            claims.append(compare(f"EMA-Nesterov(AdamW) <= {peer}", ema, "<=", _mean(runs, peer)))
    if any(k.endswith(",beta=4") for k in r["sweep"]):
        claims.append(beta4_claim(r["sweep"]))
    return claims


def lm_bases(args: argparse.Namespace) -> Outcome:
    """Byte-level LM over AdamW, Muon and SOAP, with and without EMA-Nesterov, and peers."""
    return _lm_bases_outcome(args, None)


def lm_bases_small_beta(args: argparse.Namespace) -> Outcome:
    """``lm_bases`` with the beta grid {0.1, 0.25, 0.5}, below the spec's {0.5, 1, 2, 4}."""
    from lm_bases import SMALL_BETAS

    return _lm_bases_outcome(args, SMALL_BETAS)


def _lm_bases_outcome(args: argparse.Namespace, betas: list[float] | None) -> Outcome:
    from lm_bases import run_lm_bases

    methodkit.seed_everything(args.seeds[0])
    workers = getattr(args, "workers", 1)
    r = run_lm_bases(list(args.seeds), args.quick, workers=workers, betas=betas)
    runs = r["runs"]
    rows = [
        ResultRow.from_values(n, "val_loss", [x["val_loss"] for x in rs], False)
        for n, rs in runs.items()
    ]
    rows += [
        ResultRow.from_values(f"sweep {k}", "val_loss_sweep", [v["val_loss"]])
        for k, v in r["sweep"].items()
    ]
    config = {
        **r["config"],
        "corpus": r["corpus"],
        "sweep": r["sweep"],
        "curves": {
            n: {"steps": rs[0]["curve_steps"], "val_loss": [x["curve_val_loss"] for x in rs]}
            for n, rs in runs.items()
        },
    }
    return Outcome(
        config,
        rows,
        _lm_bases_claims(r),
        plot_metrics=["val_loss"],
        units={"val_loss": "nats/byte"},
        extra_plots={"curves": plot_char_lm},
    )
