"""Helper of bench/run.py: ``EchoRNNClassifier`` defaults against logistic regression.

Both read aeon's bundled ItalyPowerDemand and GunPoint (train/test as shipped); logistic
regression sees the flattened, standardised series, the classifier its own defaults.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from hel import EchoRNNClassifier
from methodkit.bench import Outcome, ResultRow, compare

DATASETS = {"italy_power_demand": "load_italy_power_demand", "gunpoint": "load_gunpoint"}
QUICK_EPOCHS = 3


def _load(name: str) -> tuple:
    import aeon.datasets as ds

    load = getattr(ds, DATASETS[name])
    Xtr, ytr = load(split="train")
    Xte, yte = load(split="test")
    return np.asarray(Xtr, float), np.asarray(ytr), np.asarray(Xte, float), np.asarray(yte)


def _logistic(Xtr: Any, ytr: Any, Xte: Any, yte: Any) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    return float(clf.fit(Xtr.reshape(len(Xtr), -1), ytr).score(Xte.reshape(len(Xte), -1), yte))


def classifier(args: Any) -> Outcome:
    """Test accuracy of the classifier's defaults (HEL and BPTT) vs logistic regression."""
    rows, claims = [], []
    for name in DATASETS:
        Xtr, ytr, Xte, yte = _load(name)
        acc = {"logistic_regression": [_logistic(Xtr, ytr, Xte, yte)] * len(args.seeds)}
        for est in ("hel", "bptt"):
            acc[est], wall = [], []
            for seed in args.seeds:
                opts = {"epochs": QUICK_EPOCHS} if args.quick else {}
                clf = EchoRNNClassifier(estimator=est, random_state=seed, **opts)
                t0 = time.perf_counter()
                acc[est].append(float(clf.fit(Xtr, ytr).score(Xte, yte)))
                wall.append(time.perf_counter() - t0)
            rows.append(ResultRow.from_values(f"{name}/{est}", "fit_wall_s", wall, False))
        rows += [
            ResultRow.from_values(f"{name}/{k}", "test_accuracy", v, True) for k, v in acc.items()
        ]
        hel, lr = float(np.mean(acc["hel"])), acc["logistic_regression"][0]
        claims.append(
            compare(
                f"{name}: EchoRNNClassifier defaults (HEL) within 3 points of logistic regression",
                hel,
                ">=",
                lr - 0.03,
                measured=f"HEL {hel:.3f} (BPTT {np.mean(acc['bptt']):.3f}) vs logistic {lr:.3f}",
            )
        )
    cfg = {
        "classifier": "EchoRNNClassifier defaults"
        + (f", epochs={QUICK_EPOCHS}" if args.quick else ""),
        "baseline": "StandardScaler + LogisticRegression(max_iter=2000) on flattened series",
        "data": "aeon bundled train/test splits",
    }
    return Outcome(config=cfg, results=rows, claims=claims, plot_metrics=["test_accuracy"])
