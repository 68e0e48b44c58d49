"""The cost suite (issue 51): fit and predict time of the neural PLVM beside its baselines.

PLVM-PoE on tasks A+B against the single-task PLVM (task A: the same estimator on one task)
and the HMM process baseline (hmmlearn, A+B), on the spec's budget sizes (2,000 training
persons, 1,000 test persons, traces cut at tau = 0.25, L <= 40). Neural fits run a fixed
number of epochs (no early stop, no restart) so every rep does the same work; the epochs are
scaled (see ``EPOCHS``): the fit time of a neural model is linear in them. Side by side in one
process, interleaved rep by rep; the statistic is the median.
"""

from __future__ import annotations

from typing import Any

import tasks

from methodkit.bench import Outcome, ResultRow, check, cost_entry, interleaved, stable_ratio
from plvm import PLVMClassifier, simulate_population
from plvm.baselines import HMMProcessBaseline, SingleTaskPLVM

EPOCHS = 20  # of the spec's 100 (x0.2): per-epoch cost is what the ratio compares


def cost(args: Any) -> Outcome:
    """PLVM-PoE A+B vs SingleTaskPLVM (A) and HMMProcessBaseline (A+B): fit s, predict s."""
    seed = args.seeds[0]
    n_train, n_test, epochs, reps = (200, 100, 2, 2) if args.quick else (2000, 1000, EPOCHS, 5)
    st = simulate_population(n_train + n_test, "complementary", seed=seed)
    src = st.traces.truncate(frac=tasks.MAIN_TAU).select_tasks(["A", "B"])
    tr, te = src.subset(range(n_train)), src.subset(range(n_train, n_train + n_test))
    y = st.y[:n_train]
    neural = {"epochs": epochs, "patience": epochs, "restarts": 0, "max_len": 40,
              "random_state": seed}  # fmt: skip
    makers = {
        "PLVM-PoE (A+B)": (lambda: PLVMClassifier(**neural), ["A", "B"]),
        "single-task PLVM (A)": (lambda: SingleTaskPLVM(**neural), ["A"]),
        "HMM process baseline (A+B)": (lambda: HMMProcessBaseline(random_state=seed), ["A", "B"]),
    }
    fitted: dict[str, Any] = {}

    def fit(name: str) -> None:
        make, sources = makers[name]
        fitted[name] = make().fit(tr, y, sources)

    fit_s = interleaved({k: (lambda k=k: fit(k)) for k in makers}, reps)
    pred_s = interleaved({k: (lambda k=k: fitted[k].predict_proba(te)) for k in makers}, reps)
    ours, single, hmm = makers
    stat = f"median of {reps} interleaved reps"
    fit_stat = f"{stat}; {epochs} epochs each (no early stop)"
    cost_list = [
        cost_entry(f"fit time ({n_train} persons, {epochs} epochs)", "s", True, ours, fit_s[ours],
              single, fit_s[single], fit_stat),
        cost_entry(f"fit time ({n_train} persons)", "s", True, ours, fit_s[ours], hmm, fit_s[hmm],
              fit_stat),
        cost_entry(f"predict time ({n_test} persons)", "s", True, ours, pred_s[ours], single,
              pred_s[single], stat),
        cost_entry(f"predict time ({n_test} persons)", "s", True, ours, pred_s[ours], hmm,
              pred_s[hmm], stat),
    ]  # fmt: skip
    probs_ok = all(fitted[k].predict_proba(te).shape == (n_test, 2) for k in makers)
    claims = [
        check("every model predicts (n_test, 2) probabilities after its fit", probs_ok,
              "all shapes (n_test, 2)" if probs_ok else "a shape differs", quick=True),
        stable_ratio(cost_list[0]),
        stable_ratio(cost_list[2]),
    ]  # fmt: skip
    rows = [ResultRow.from_values(k, "fit_s", v, False) for k, v in fit_s.items()]
    rows += [ResultRow.from_values(k, "predict_s", v, False) for k, v in pred_s.items()]
    config = {
        "scenario": "complementary", "tau": tasks.MAIN_TAU, "n_train": n_train,
        "n_test": n_test, "epochs": epochs, "epoch_scale": f"{epochs}/100 of the spec's epochs",
        "max_len": 40, "reps": reps,
        "timing": "interleaved, order rotating each rep, one warm-up each",
        "cost": cost_list,
    }  # fmt: skip
    return Outcome(config, rows, claims, seeds=[seed], plot_metrics=["fit_s", "predict_s"],
                   labels={"fit_s": "fit time", "predict_s": "predict time"},
                   units={"fit_s": "s", "predict_s": "s"})  # fmt: skip
