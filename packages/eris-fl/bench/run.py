"""ERIS reproduction on sklearn digits: utility + communication, and two leakage protocols.

    make bench PKG=eris-fl                    # full run (3 seeds), from the repository root
    python bench/run.py --quick --seeds 0     # smoke run, from packages/eris-fl

Writes ``digits_utility``, ``leakage_mia``, ``leakage_dlg`` and ``round_time`` records (JSON +
PNG) into the package's ``bench/results`` (or ``--out``). One seed of each benchmark is in
``tasks.py``, the timing in ``timing.py``.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
from collections.abc import Sequence

import tasks
import timing

from eris_fl import RandK
from methodkit.bench import Outcome, ResultRow, check, run_suite

PACKAGE = "eris-fl"


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


# ----------------------------------------------------------------------------- utility
def digits_utility(args: argparse.Namespace) -> Outcome:
    """Accuracy, client uplink and max inbound load of ERIS (+DSC) against FedAvg baselines."""
    K, A = 10, 4
    rounds = 3 if args.quick else 60
    exact_rounds = 2 if args.quick else 60
    exact_As = [1, 4] if args.quick else [1, 2, 4, 10]
    methods = tasks.utility_methods(A)
    if args.quick:
        methods = {m: methods[m] for m in ("fedavg", "eris_A4", "eris_dsc_randk10")}
    acc, uplink, inbound = ({m: [] for m in methods} for _ in range(3))
    exact_err: list[float] = []
    d = 0
    for seed in args.seeds:
        out = tasks.utility_seed(seed, methods, rounds, exact_rounds, exact_As, K, A)
        for m in methods:
            acc[m].append(out["acc"][m])
            uplink[m].append(out["uplink"][m])
            inbound[m].append(out["inbound"][m])
        exact_err += out["exact_err"]
        d = out["d"]
        _log(f"[utility] seed {seed} done")
    results = [ResultRow.from_values(m, "test_accuracy", acc[m], True) for m in methods]
    results += [
        ResultRow.from_values(m, "client_uplink_vs_fedavg", uplink[m], False) for m in methods
    ]
    results += [
        ResultRow.from_values(m, "max_inbound_vs_fedavg_server_over_A", inbound[m], False)
        for m in methods
    ]
    mean = {m: _mean(v) for m, v in acc.items()}
    gap = 100 * (mean["fedavg"] - mean["eris_dsc_randk10"])
    up_dsc = max(uplink["eris_dsc_randk10"])
    inb_rand, inb_dsc = max(inbound["eris_A4"]), max(inbound["eris_dsc_randk10"])
    err = max(exact_err)
    claims = [
        check(
            "ERIS+DSC (rand-k 10%, A=4) mean accuracy within 1.5 points of FedAvg",
            gap <= 1.5,
            f"FedAvg {mean['fedavg']:.4f}, ERIS+DSC {mean['eris_dsc_randk10']:.4f} "
            f"(gap {gap:.2f} points)",
            inputs=[mean["fedavg"], mean["eris_dsc_randk10"]],
        ),
        check(
            f"ERIS without DSC equals FedAvg to 1e-6 after {exact_rounds} rounds (float64), "
            f"A in {exact_As}",
            err <= 1e-6,
            f"max |x_ERIS - x_FedAvg| = {err:.3g}",
            inputs=[err],
            quick=True,  # an exact identity: it holds at any scale
        ),
        check(
            "ERIS+DSC client uplink <= 12% of FedAvg bytes",
            up_dsc <= 0.12,
            f"{100 * up_dsc:.2f}%",
            inputs=[up_dsc],
        ),
        check(
            "max node inbound load <= 1.1 x FedAvg server load / A (ERIS A=4 and ERIS+DSC)",
            inb_rand <= 1.1 and inb_dsc <= 1.1,
            f"random partition {inb_rand:.3f}, ERIS+DSC {inb_dsc:.3f}",
            inputs=[inb_rand, inb_dsc],
        ),
    ]
    if "eris_A4_balanced" in inbound:
        bal = max(inbound["eris_A4_balanced"])
        expected = K * 4 * math.ceil(d / A) / (K * 4 * d / A)
        claims.append(
            check(
                "balanced partition: max inbound is exactly K*ceil(d/A) values",
                abs(bal - expected) < 1e-12,
                f"{bal:.6f} vs {expected:.6f}",
                inputs=[bal, expected],
                quick=True,  # an exact identity: it holds at any scale
            )
        )
    config = {
        "data": "sklearn digits, 70/30 stratified split, Dirichlet(0.5) over 10 clients",
        "model": "MLP 64-64-10 (ReLU), 4810 params",
        "local": "SGD lr 0.1, batch 16, 1 epoch",
        "rounds": rounds,
        "num_aggregators": A,
        "exactness_rounds": exact_rounds,
        "exactness_A": exact_As,
    }
    return Outcome(config, results, claims, units={"test_accuracy": "fraction"})


# ----------------------------------------------------------------------------- MIA
MIA_VARIANTS = {
    "server (A=1)": {"num_aggregators": 1},
    "A=2": {"num_aggregators": 2},
    "A=4": {"num_aggregators": 4},
    "A=8": {"num_aggregators": 8},
    "A=4 + DSC rand-k 10%": {"num_aggregators": 4, "compressor": RandK(0.1)},
}


def leakage_mia(args: argparse.Namespace) -> Outcome:
    """Protocol A: membership inference by aggregator 0 on what it sees of each client."""
    warmup = 2 if args.quick else 5
    epochs = 5 if args.quick else 30
    variants = MIA_VARIANTS
    if args.quick:
        variants = {k: variants[k] for k in ("server (A=1)", "A=4", "A=4 + DSC rand-k 10%")}
    aucs: dict[str, list[float]] = {v: [] for v in [*variants, "global model only"]}
    for seed in args.seeds:
        for name, auc in tasks.mia_seed(seed, variants, warmup, epochs, num_clients=10).items():
            aucs[name].append(auc)
        _log(f"[mia] seed {seed} done")
    results = [ResultRow.from_values(v, "mia_auc", vals, False) for v, vals in aucs.items()]
    mean = {v: _mean(x) for v, x in aucs.items()}
    As = [v for v in ("server (A=1)", "A=2", "A=4", "A=8") if v in mean]
    falls = all(mean[a] > mean[b] for a, b in itertools.pairwise(As))
    claims = [
        check(
            "membership-inference AUC falls with A and with DSC",
            falls and mean["A=4 + DSC rand-k 10%"] < mean["A=4"],
            ", ".join(f"{v} {mean[v]:.3f}" for v in mean),
            inputs=[mean[a] for a in As] + [mean["A=4 + DSC rand-k 10%"]],
        )
    ]
    config = {
        "protocol": "spec protocol A: MLP 64-256-10, 50/50 split, Dirichlet(1) over 10 clients, "
        f"{warmup} warm-up rounds (1 epoch, batch 16), then {epochs} local epochs (batch 8); "
        "observer = aggregator 0 attacks every other client's real message; score = -loss",
    }
    return Outcome(config, results, claims, units={"mia_auc": "AUC"})


# ----------------------------------------------------------------------------- DLG
DLG_RUNS = {
    "full gradient (A=1)": {"num_aggregators": 1},
    "A=4": {"num_aggregators": 4},
    "A=16": {"num_aggregators": 16},
    "A=4 + DSC rand-k 10%": {"num_aggregators": 4, "compressor": RandK(0.1)},
}


def leakage_dlg(args: argparse.Namespace) -> Outcome:
    """Protocol B: DLG gradient inversion by aggregator 0 on single-digit clients."""
    n_targets = 1 if args.quick else 8
    iters = 60 if args.quick else 300
    attack_round = 3
    names = [*DLG_RUNS, "A=4 + rand-k 10% (no shift)", "random guess"]
    scores: dict[str, list[float]] = {n: [] for n in names}
    for seed in args.seeds:
        out = tasks.dlg_seed(seed, DLG_RUNS, 16, n_targets, iters, attack_round)
        for name in names:
            scores[name].append(out[name])
        _log(f"[dlg] seed {seed} done")
    results = [ResultRow.from_values(n, "dlg_psnr_db", v, False) for n, v in scores.items()]
    m = {n: _mean(v) for n, v in scores.items()}
    full, a4, a16, dsc = (m[n] for n in DLG_RUNS)
    claims = [
        check(
            "DLG PSNR falls with A (1 > 4 > 16) and with DSC (A=4+DSC < A=4)",
            full > a4 > a16 and dsc < a4,
            ", ".join(f"{n} {v:.1f} dB" for n, v in m.items()),
            inputs=[full, a4, a16, dsc],
        )
    ]
    config = {
        "protocol": "spec protocol B: sigmoid MLP 64-64-10, 16 clients with one digit each, "
        "update = one gradient (u=-g), server lr 0.1; observer = aggregator 0 attacks the real "
        f"messages of round {attack_round} of each run (DSC shifts learned over 3 rounds); "
        f"DLG with iDLG label inference, Adam lr 0.05, {iters} steps",
        "targets_per_seed": n_targets,
    }
    return Outcome(config, results, claims, units={"dlg_psnr_db": "dB"})


# ----------------------------------------------------------------------------- speed
def round_time(args: argparse.Namespace) -> Outcome:
    """Seconds per simulator round (no observer, and with a byte counter) vs a plain loop."""
    K, A = 10, 4
    rounds, blocks = (1, 2) if args.quick else (5, 10)
    per: dict[str, list[float]] = {"plain": [], "eris": [], "eris_counted": []}
    ratios, counted, diffs = [], [], []
    for seed in args.seeds:
        out = timing.round_times(seed, rounds, blocks, K, A)
        for name in per:
            per[name].append(out[name])
        ratios += out["ratios"]
        counted += out["counted_ratios"]
        diffs += [out["max_diff"], out["counted_diff"]]
        _log(f"[round_time] seed {seed} done")
    names = {"plain": "plain FedAvg loop", "eris": "ERIS A=4", "eris_counted": "ERIS A=4 + bytes"}
    results = [ResultRow.from_values(names[n], "s_per_round", v, False) for n, v in per.items()]
    results.append(ResultRow.from_values("ERIS A=4", "ratio_vs_plain", ratios, False))
    results.append(ResultRow.from_values("ERIS A=4 + bytes", "ratio_vs_plain", counted, False))
    ratio = statistics.median_high(ratios)
    diff = max(diffs)
    claims = [
        check(
            "simulator round (no observer) within 1.15x of a plain FedAvg loop (median of blocks)",
            ratio <= 1.15,
            f"median ratio {ratio:.3f} over {len(ratios)} blocks "
            f"(min {min(ratios):.3f}, max {max(ratios):.3f})",
            inputs=[ratio],
        ),
        check(
            "ERIS without DSC gives the plain loop's parameters bit for bit",
            diff == 0.0,
            f"max |x_ERIS - x_plain| = {diff:.3g}",
            inputs=[diff],
            quick=True,  # an exact identity: it holds at any scale
        ),
    ]
    config = {
        "model": "MLP 64-64-10 (ReLU, float32), digits, Dirichlet(0.5) over 10 clients",
        "local": "SGD lr 0.1, batch 16, 1 epoch",
        "num_aggregators": A,
        "rounds_per_block": rounds,
        "blocks": blocks,
        "timing": "plain / ERIS / ERIS+ByteCounter interleaved block by block in one process",
    }
    return Outcome(config, results, claims, units={"s_per_round": "s", "ratio_vs_plain": "x"})


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected benchmarks (all three by default); see ``--help``."""
    benchmarks = {
        "digits_utility": digits_utility,
        "leakage_mia": leakage_mia,
        "leakage_dlg": leakage_dlg,
        "round_time": round_time,
    }
    return run_suite(PACKAGE, benchmarks, argv, description=__doc__.splitlines()[0])


if __name__ == "__main__":
    raise SystemExit(main())
