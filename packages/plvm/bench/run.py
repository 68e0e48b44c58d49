"""plvm reproduction: early cross-task strategy prediction on the controlled simulator.

Benchmarks: ``complementary`` and ``redundant`` (every model, tau in {0.1, 0.25, 0.5},
3 seeds), ``budget`` (one neural PLVM-PoE at the spec's full size: training time) and
``cost`` (fit and predict time beside the single-task PLVM and the HMM baseline).

    python bench/run.py [--quick] [--seeds 0 1 2] [--threads 1] [--only complementary ...]

Records and plots go to the package's ``bench/results`` (``--out`` to change it).
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

import plots
import tasks
from cost import cost

from methodkit.bench import Outcome, ResultRow, check, run_suite

PACKAGE = "plvm"
PLOT = {"plot_metrics": ["auroc", "probe_r2"]}


def overview(rec: dict, path: Path) -> None:
    """Redraw ``<benchmark>.png``: the runner's one-axis plot cannot show 45 labels apart."""
    plots.plot_overview(rec, path.with_name(f"{rec['benchmark']}.png"))


def scenario(name: str, args: argparse.Namespace) -> Outcome:
    """Every model on one preset; claims from the spec's acceptance list."""
    df = tasks.run_scenario(name, list(args.seeds), args.quick)
    claims = tasks.complementary_claims(df) if name == "complementary" else (
        tasks.redundant_claims(df))  # fmt: skip
    seeds = list(args.seeds)[:1] if args.quick else None  # a smoke run uses one seed
    return Outcome(tasks.protocol(args.quick), tasks.result_rows(df), claims, seeds=seeds,
                   extra_plots={"tau": tasks.plot_tau, "overview": overview}, **PLOT)  # fmt: skip


def budget(args: argparse.Namespace) -> Outcome:
    """Wall time of one DeepSets PLVM-PoE on 2,000 training persons, <= 100 epochs, L <= 40."""
    from plvm import PLVMClassifier, simulate_population
    from plvm.evaluate import scores

    n_train, epochs = (300, 5) if args.quick else (2000, 100)
    st = simulate_population(n_train + 1000, "complementary", seed=args.seeds[0])
    src = st.traces.truncate(frac=tasks.MAIN_TAU).select_tasks(["A", "B"])
    tr, te = src.subset(range(n_train)), src.subset(range(n_train, n_train + 1000))
    t0 = time.perf_counter()
    clf = PLVMClassifier(epochs=epochs, patience=epochs, max_len=40, random_state=args.seeds[0])
    clf.fit(tr, st.y[:n_train])
    secs = time.perf_counter() - t0
    auc = scores(st.y[n_train:], clf.predict_proba(te)[:, 1])["auroc"]
    rows = [ResultRow.from_values("plvm A+B (full size)", "fit_s", [secs], False),
            ResultRow.from_values("plvm A+B (full size)", "auroc", [auc], True)]  # fmt: skip
    claim = check(
        f"DeepSets PLVM-PoE on {n_train} persons, {epochs} epochs (no early stop), L <= 40 "
        "trains in <= 300 s on one thread", secs <= 300, f"{secs:.0f} s, test AUROC {auc:.3f}",
        inputs=[secs, auc], degenerate=args.quick,
    )  # fmt: skip
    cfg = {"n_train": n_train, "epochs": epochs, "tau": tasks.MAIN_TAU, "max_len": 40}
    return Outcome(cfg, rows, [claim], seeds=[args.seeds[0]], units={"fit_s": "s"},
                   labels={"fit_s": "fit time", "auroc": "test AUROC"})  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    benchmarks = {n: partial(scenario, n) for n in ("complementary", "redundant")}
    benchmarks["budget"] = budget
    benchmarks["cost"] = cost
    return run_suite(PACKAGE, benchmarks, argv, description=__doc__.splitlines()[0])


if __name__ == "__main__":
    sys.exit(main())
