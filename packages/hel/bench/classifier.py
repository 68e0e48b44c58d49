"""Helper of bench/run.py: ``EchoRNNClassifier`` against the peers a time-series user tries.

aeon's four bundled sets (ItalyPowerDemand, GunPoint, ArrowHead, BasicMotions; train/test as
shipped, loaded offline). Peers: logistic regression on the flattened, standardised series
(its ``C`` chosen by 5-fold cross-validation on the training split), aeon's MiniRocket
classifier, and the same network trained by BPTT. The classifier's settings are chosen on the
training splits only: every setting of :data:`GRID` is fitted (HEL, seed 0) on a stratified
two-thirds of each training split and scored on the remaining third; the setting with the
best mean inner-validation accuracy over the four sets is then used for HEL and BPTT alike,
3 seeds each, and only then scored on the test splits.
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import Any

import numpy as np

from hel import EchoRNNClassifier
from methodkit.bench import Outcome, ResultRow, check

DATASETS = {
    "italy_power_demand": "load_italy_power_demand",
    "gunpoint": "load_gunpoint",
    "arrow_head": "load_arrow_head",
    "basic_motions": "load_basic_motions",
}
#: Settings tried by inner validation; the first is the classifier's default.
GRID = [
    {"lr": 1e-2, "hidden_size": 64},
    {"lr": 3e-3, "hidden_size": 64},
    {"lr": 1e-2, "hidden_size": 32},
    {"lr": 3e-3, "hidden_size": 32},
]
EPOCHS = 200  # the classifier's default
#: ``--quick`` (a smoke run of the code path, < 1 min): the shortest univariate and the
#: multivariate set, 2 epochs, the first two settings; the full protocol is unchanged.
QUICK_EPOCHS = 2
QUICK_DATASETS = ("italy_power_demand", "basic_motions")
PEERS = ("logistic_regression", "minirocket", "bptt")
#: Axis words of the standard plot (the gap of HEL's test accuracy to the best peer's).
GAP_UNITS = {"best_peer_minus_hel": "accuracy points"}
GAP_LABELS = {"best_peer_minus_hel": "best peer minus HEL"}
#: Words for the records, the README table and the plots.
SET_LABEL = {
    "italy_power_demand": "ItalyPowerDemand",
    "gunpoint": "GunPoint",
    "arrow_head": "ArrowHead",
    "basic_motions": "BasicMotions",
}
METHOD_LABEL = {
    "hel": "HEL (echo)",
    "bptt": "BPTT, same network",
    "minirocket": "MiniRocket (aeon)",
    "logistic_regression": "logistic regression",
}


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _load(name: str) -> tuple:
    import aeon.datasets as ds

    load = getattr(ds, DATASETS[name])
    Xtr, ytr = load(split="train")
    Xte, yte = load(split="test")
    return np.asarray(Xtr, float), np.asarray(ytr), np.asarray(Xte, float), np.asarray(yte)


def _logistic(Xtr: Any, ytr: Any, Xte: Any, yte: Any) -> float:
    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(), LogisticRegressionCV(cv=5, max_iter=2000))
    return float(clf.fit(Xtr.reshape(len(Xtr), -1), ytr).score(Xte.reshape(len(Xte), -1), yte))


def _minirocket(Xtr: Any, ytr: Any, Xte: Any, yte: Any, seed: int) -> float:
    import torch
    from aeon.classification.convolution_based import MiniRocketClassifier

    # aeon sets numba's thread count, which shares torch's OpenMP runtime: without restoring
    # it, every later torch fit ran two OpenMP threads (up to ~10x slower on a busy 2-core
    # machine; the issue-48 record's fit times were inflated this way)
    threads = torch.get_num_threads()
    try:
        return float(MiniRocketClassifier(random_state=seed).fit(Xtr, ytr).score(Xte, yte))
    finally:
        torch.set_num_threads(threads)


def _fit_score(Xtr: Any, ytr: Any, Xte: Any, yte: Any, **opts: Any) -> tuple[float, float]:
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        acc = float(EchoRNNClassifier(**opts).fit(Xtr, ytr).score(Xte, yte))
    n_warn = sum("echo missed" in str(w.message) for w in caught)
    if n_warn:
        _log(f"    {n_warn} ReversibilityWarning(s) during the fit")
    return acc, time.perf_counter() - t0


def select_setting(data: dict, epochs: int, grid: list[dict]) -> tuple[dict, dict]:
    """Inner validation on the training splits: the setting with the best mean accuracy."""
    from sklearn.model_selection import train_test_split

    scores: dict[int, list[float]] = {i: [] for i in range(len(grid))}
    for name, (Xtr, ytr, _, _) in data.items():
        a, b, ya, yb = train_test_split(Xtr, ytr, test_size=1 / 3, stratify=ytr, random_state=0)
        for i, setting in enumerate(grid):
            acc, wall = _fit_score(a, ya, b, yb, epochs=epochs, random_state=0, **setting)
            scores[i].append(acc)
            _log(f"  inner {name} {setting}: {acc:.3f} ({wall:.1f}s)")
    means = {i: float(np.mean(v)) for i, v in scores.items()}
    best = max(means, key=lambda i: (means[i], -i))  # ties: the earlier (default) setting
    return grid[best], {str(grid[i]): m for i, m in means.items()}


def _dataset(name: str, data: tuple, setting: dict, epochs: int, seeds: list[int]) -> dict:
    Xtr, ytr, Xte, yte = data
    acc: dict[str, list[float]] = {"hel": [], "bptt": [], "minirocket": []}
    wall: dict[str, list[float]] = {"hel": [], "bptt": []}
    for seed in seeds:
        for est in ("hel", "bptt"):
            a, w = _fit_score(
                Xtr, ytr, Xte, yte, estimator=est, epochs=epochs, random_state=seed, **setting
            )
            acc[est].append(a)
            wall[est].append(w)
            _log(f"  {name} seed={seed} {est}: {a:.3f} ({w:.1f}s)")
        acc["minirocket"].append(_minirocket(Xtr, ytr, Xte, yte, seed))
    acc["logistic_regression"] = [_logistic(Xtr, ytr, Xte, yte)] * len(seeds)  # deterministic
    return {"acc": acc, "wall": wall}


def classifier(args: Any) -> Outcome:
    """HEL-trained classifier vs BPTT (same network), logistic regression and MiniRocket."""
    epochs = QUICK_EPOCHS if args.quick else EPOCHS
    grid = GRID[:2] if args.quick else GRID
    names = QUICK_DATASETS if args.quick else tuple(DATASETS)
    data = {name: _load(name) for name in names}
    setting, inner = select_setting(data, epochs, grid)
    _log(f"  selected {setting} (inner validation means {inner})")
    rows, claims, best_peer = [], [], {}
    for name in names:
        res = _dataset(name, data[name], setting, epochs, list(args.seeds))
        acc, label = res["acc"], SET_LABEL[name]
        rows += [
            ResultRow.from_values(f"{label}: {METHOD_LABEL[k]}", "test_accuracy", v, True)
            for k, v in acc.items()
        ]
        rows += [
            ResultRow.from_values(f"{label}: {METHOD_LABEL[k]}", "fit_wall_s", v, False)
            for k, v in res["wall"].items()
        ]
        means = {k: float(np.mean(v)) for k, v in acc.items()}
        best = max(PEERS, key=lambda k: means[k])
        best_peer[label] = METHOD_LABEL[best]
        rows.append(
            ResultRow.from_values(
                label,  # the best peer is named in the claim and in config["best_peer"]
                "best_peer_minus_hel",
                [100 * (means[best] - means["hel"])],
                False,
            )
        )
        gap = means["hel"] - means["bptt"]
        claims.append(
            check(
                f"{label}: HEL within 3 points of BPTT on the same network (mean of seeds)",
                abs(gap) <= 0.03,
                f"HEL {means['hel']:.3f} vs BPTT {means['bptt']:.3f} ({100 * gap:+.1f} points); "
                f"best peer {METHOD_LABEL[best]} {means[best]:.3f} "
                f"({100 * (means['hel'] - means[best]):+.1f})",
                inputs=[means["hel"], means["bptt"]],
            )
        )
    cfg = {
        "classifier": f"EchoRNNClassifier(estimator='hel' or 'bptt', epochs={epochs}, **setting)",
        "setting": setting,
        "selection": "inner validation on the training splits only: stratified 2/3 - 1/3 "
        "split of each training set (random_state 0), HEL seed 0, best mean accuracy over "
        f"the {len(names)} sets among {grid}",
        "inner_validation_accuracy": inner,
        "peers": "logistic regression (StandardScaler + LogisticRegressionCV(cv=5) on the "
        "flattened series), aeon MiniRocketClassifier(random_state=seed), BPTT on the same "
        "network and setting",
        "data": "aeon bundled train/test splits: " + ", ".join(names),
        "scale": "1 (the classifier's default 200 epochs)" if not args.quick else "quick",
        "best_peer": best_peer,
    }
    return Outcome(
        config=cfg,
        results=rows,
        claims=claims,
        plot_metrics=["best_peer_minus_hel"],
        units=GAP_UNITS,
        labels=GAP_LABELS,
        extra_plots={"accuracy": accuracy_plot},
    )


def accuracy_plot(record: dict, path: Any) -> None:
    """Test accuracy per set (x) and method (colour), mean +- std over the seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # records before the words naming used "<set key>/<method key>"
    old = {
        f"{s}/{m}": f"{SET_LABEL[s]}: {METHOD_LABEL[m]}" for s in SET_LABEL for m in METHOD_LABEL
    }
    rows = [
        {**r, "method": old.get(r["method"], r["method"])}
        for r in record["results"]
        if r["metric"] == "test_accuracy"
    ]
    sets = list(dict.fromkeys(r["method"].split(": ")[0] for r in rows))
    methods = list(METHOD_LABEL.values())
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    width = 0.8 / len(methods)
    lo, hi = 1.0, 0.0
    for j, m in enumerate(methods):
        for i, s in enumerate(sets):
            r = next((r for r in rows if r["method"] == f"{s}: {m}"), None)
            if r is None or r.get("mean") is None:
                continue
            x = i - 0.4 + width * (j + 0.5)
            ax.errorbar(
                x,
                r["mean"],
                yerr=r["std"],
                fmt="o",
                color=f"C{j}",
                capsize=3,
                label=m if i == 0 else None,
            )
            lo, hi = min(lo, r["mean"] - r["std"]), max(hi, r["mean"] + r["std"])
    ax.set_xticks(range(len(sets)), sets, fontsize=8)
    pad = 0.05 * max(hi - lo, 0.05)
    ax.set_ylim(lo - pad, min(1.0, hi) + pad)  # the data's range, not from zero
    ax.set_xlabel("aeon data set (bundled train/test split)", fontsize=8)
    ax.set_ylabel("test accuracy\n(higher is better)", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=4)
    n = max((r["n"] for r in rows), default=0)
    ax.set_title(f"EchoRNNClassifier (HEL) vs peers: mean ± std over {n} seeds", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
