"""ESSAM benchmarks: the toy arithmetic RL world (``calibration``: can MinimalGRPO learn there?
``arith_rl``: ES / ESSAM / accelerated ESSAM / MinimalGRPO at equal rollouts and equal wall time),
peak training-step memory, the 2-D flatness diagnostic and SmolLM2-135M-Instruct on few-shot sums
at equal wall time, and SmolLM2 with the population over 2 gloo ranks (``smollm2_dist``).

    python bench/run.py [--quick] [--seeds 0 1 2] [--threads 1]
                        [--only calibration arith_rl peak_memory flatness smollm2_rl smollm2_dist]
"""

from __future__ import annotations

import argparse
import sys

import arith_suites
import flatness
import memory_steps
import smollm2_bench
import smollm2_dist

from methodkit.bench import Outcome, run_suite

PACKAGE = "essam"
MEMORY = {"model": {"n_layer": 8, "n_embd": 512, "n_head": 8}, "batch": 16, "max_new_tokens": 40}


def peak_memory(args: argparse.Namespace) -> Outcome:
    # the quick memory smoke run measures the quick training model
    mcfg = arith_suites.QUICK["model"] if args.quick else MEMORY["model"]
    mx = arith_suites.QUICK["max_new_tokens"] if args.quick else MEMORY["max_new_tokens"]
    rows, claim, config = memory_steps.measure(mcfg, MEMORY["batch"], mx, args.quick)
    return Outcome(config, rows, [claim], seeds=[0], units={"peak_MiB": "MiB"})


def flatness_diagnostic(args: argparse.Namespace) -> Outcome:
    return flatness.outcome(args.quick, args.seeds[0])


def smollm2_rl(args: argparse.Namespace) -> Outcome:
    return smollm2_bench.outcome(args.quick, args.seeds)


def main(argv: list[str] | None = None) -> int:
    benches = {
        "calibration": arith_suites.calibration,
        "arith_rl": arith_suites.arith_rl,
        "peak_memory": peak_memory,
        "flatness": flatness_diagnostic,
        "smollm2_rl": smollm2_rl,
        "smollm2_dist": lambda args: smollm2_dist.outcome(args.quick, args.seeds),
    }
    return run_suite(PACKAGE, benches, argv)


if __name__ == "__main__":
    sys.exit(main())
