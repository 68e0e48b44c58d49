"""Evaluation harness: every model on one split; AUROC, balanced accuracy, Brier, probe R²."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from methodkit import progress as show_progress
from plvm._validation import check_finite, check_fraction
from plvm.baselines import (
    ConcatNoFusion,
    HMMProcessBaseline,
    LateFusion,
    OutcomeSummaryClassifier,
    ProcessStatsClassifier,
)
from plvm.estimator import PLVMClassifier
from plvm.linear import PLVMLinear
from plvm.sim import SimulatedStudy
from plvm.traces import TraceSet, process_statistics

__all__ = ["MODELS", "cross_task_benchmark", "latent_probe_r2", "scores"]


def latent_probe_r2(
    mu_train: np.ndarray, z_train: np.ndarray, mu_test: np.ndarray, z_test: np.ndarray
) -> float:
    """R² (mean over latent dims) of a linear regression from posterior means to true ``z``.

    Raises:
        ValueError: If a pair has different numbers of persons or holds NaN/inf.
    """
    from sklearn.linear_model import LinearRegression

    for (a, b), name in (((mu_train, z_train), "train"), ((mu_test, z_test), "test")):
        if len(a) != len(b):
            raise ValueError(f"mu_{name} has {len(a)} rows but z_{name} has {len(b)}")
        check_finite(np.asarray(a, dtype=np.float64), f"mu_{name}")
        check_finite(np.asarray(b, dtype=np.float64), f"z_{name}")

    return float(LinearRegression().fit(mu_train, z_train).score(mu_test, z_test))


def scores(y: np.ndarray, p: np.ndarray) -> dict[str, float]:
    """AUROC, balanced accuracy (threshold 0.5) and Brier score of probabilities ``p``."""
    from sklearn.metrics import balanced_accuracy_score, brier_score_loss, roc_auc_score

    return {
        "auroc": float(roc_auc_score(y, p)),
        "balanced_accuracy": float(balanced_accuracy_score(y, p > 0.5)),
        "brier": float(brier_score_loss(y, p)),
    }


# A model runner: (context, sources) -> (test probabilities, probe R² or NaN)
Runner = Callable[[dict[str, Any], list[str]], tuple[np.ndarray, float]]


def _stats(tr: TraceSet, tasks: Sequence[str]) -> dict[str, np.ndarray]:
    return {t: process_statistics(tr, t) for t in tasks}


def _run_linear(c: dict[str, Any], src: list[str]) -> tuple[np.ndarray, float]:
    s_tr, s_te = _stats(c["train"], src), _stats(c["test"], src)
    m = PLVMLinear(c["latent_dim"], random_state=c["seed"]).fit(s_tr, c["y_train"])
    r2 = latent_probe_r2(m.transform(s_tr), c["z_train"], m.transform(s_te), c["z_test"])
    return m.predict_proba(s_te)[:, 1], r2


def _run_plvm(fusion: str) -> Runner:
    def run(c: dict[str, Any], src: list[str]) -> tuple[np.ndarray, float]:
        cls = ConcatNoFusion if fusion == "concat" else PLVMClassifier
        params = {**c["plvm_params"], "latent_dim": c["latent_dim"], "random_state": c["seed"]}
        if fusion != "concat":
            params["fusion"] = fusion
        n = c["n_train_neural"]
        tr, ytr = c["train"].subset(np.arange(n)), c["y_train"][:n]
        m = cls(**params).fit(tr, ytr, src)
        p = m.predict_proba(c["test"])[:, 1]
        if fusion == "concat":
            return p, float("nan")
        r2 = latent_probe_r2(m.transform(tr), c["z_train"][:n], m.transform(c["test"]), c["z_test"])
        return p, r2

    return run


def _run_late(c: dict[str, Any], src: list[str]) -> tuple[np.ndarray, float]:
    params = {**c["plvm_params"], "latent_dim": c["latent_dim"], "random_state": c["seed"]}
    n = c["n_train_neural"]
    m = LateFusion(**params).fit(c["train"].subset(np.arange(n)), c["y_train"][:n], src)
    return m.predict_proba(c["test"])[:, 1], float("nan")


def _feature_runner(cls: type) -> Runner:
    def run(c: dict[str, Any], src: list[str]) -> tuple[np.ndarray, float]:
        m = cls().fit(c["train"], c["y_train"], src)
        return m.predict_proba(c["test"])[:, 1], float("nan")

    return run


def _run_outcome_full(c: dict[str, Any], src: list[str]) -> tuple[np.ndarray, float]:
    m = OutcomeSummaryClassifier().fit(c["train_full"], c["y_train"], src)
    return m.predict_proba(c["test_full"])[:, 1], float("nan")


def _run_oracle(c: dict[str, Any], src: list[str]) -> tuple[np.ndarray, float]:
    from sklearn.linear_model import LogisticRegression

    m = LogisticRegression().fit(c["z_train"], c["y_train"])
    return m.predict_proba(c["z_test"])[:, 1], 1.0


def _run_target_early(c: dict[str, Any], src: list[str]) -> tuple[np.ndarray, float]:
    m = ProcessStatsClassifier().fit(c["target_train"], c["y_train"], [c["target"]])
    return m.predict_proba(c["target_test"])[:, 1], float("nan")


#: name -> (runner, uses source tasks)
MODELS: dict[str, tuple[Runner, bool]] = {
    "outcome": (_feature_runner(OutcomeSummaryClassifier), True),
    "outcome_full": (_run_outcome_full, True),
    "stats": (_feature_runner(ProcessStatsClassifier), True),
    "hmm": (_feature_runner(HMMProcessBaseline), True),
    "linear": (_run_linear, True),
    "plvm": (_run_plvm("poe"), True),
    "plvm_moe": (_run_plvm("moe"), True),
    "concat": (_run_plvm("concat"), True),
    "late": (_run_late, True),
    "oracle": (_run_oracle, False),
    "target_early": (_run_target_early, False),
}


def cross_task_benchmark(
    study: SimulatedStudy,
    taus: Sequence[float] = (0.1, 0.25, 0.5),
    models: Mapping[str, Sequence[Sequence[str]]] | Sequence[str] = ("outcome", "linear"),
    seeds: Sequence[int] = (0,),
    *,
    train_fraction: float = 2 / 3,
    n_train_neural: int | None = None,
    latent_dim: int = 2,
    plvm_params: Mapping[str, Any] | None = None,
    progress: bool | None = None,
) -> Any:
    """Every model on the first ``tau`` of the source traces; a row per (tau, seed, model, sources).

    Args:
        study: A :class:`~plvm.sim.SimulatedStudy` (persons in random order: the first
            ``train_fraction`` train, the rest test).
        taus: Observed fractions of every source trace, each in ``(0, 1]``.
        models: Names in :data:`MODELS`, or ``{name: [source sets]}``; a name alone runs on
            every single source task and on all of them together.
        seeds: Model seeds (weights, validation split); the study is fixed.
        train_fraction: Share of persons used for training.
        n_train_neural: Training persons for the neural models (default: all training persons).
        latent_dim: ``D`` of the latent models.
        plvm_params: Extra :class:`~plvm.PLVMClassifier` parameters (epochs, hidden, ...).
        progress: A bar over the (tau, seed, model, sources) fits: ``None`` (default) on a
            terminal only, ``True`` always, ``False`` never.

    Returns:
        A pandas DataFrame with columns ``tau, seed, model, sources, auroc, balanced_accuracy,
        brier, probe_r2, fit_s``.
    """
    import pandas as pd

    taus = [check_fraction(t, "tau") for t in taus]
    src = list(study.source_tasks)
    if not isinstance(models, Mapping):
        models = {m: [[s] for s in src] + [src] if MODELS[_known(m)][1] else [src] for m in models}
    n = len(study.y)
    k = round(train_fraction * n)
    if not 2 <= k <= n - 2:
        raise ValueError(f"train_fraction={train_fraction} leaves too few persons of {n}")
    tr_idx, te_idx = np.arange(k), np.arange(k, n)
    jobs = [
        (tau, int(seed), name, list(sources))
        for tau in taus
        for seed in seeds
        for name, source_sets in models.items()
        for sources in source_sets
    ]
    rows, contexts = [], {}
    for name in models:
        _known(name)
    for tau, seed, name, sources in show_progress(
        jobs, enabled=progress, desc="cross-task benchmark", total=len(jobs)
    ):
        if (tau, seed) not in contexts:
            contexts[tau, seed] = _context(study, tau, seed, tr_idx, te_idx, latent_dim,
                                           plvm_params, min(k, n_train_neural or k))  # fmt: skip
        t0 = time.perf_counter()
        p, r2 = MODELS[_known(name)][0](contexts[tau, seed], sources)
        row = {"tau": tau, "seed": seed, "model": name, "sources": "+".join(sources)}
        row.update(scores(study.y[te_idx], p))
        row.update(probe_r2=r2, fit_s=time.perf_counter() - t0)
        rows.append(row)
    return pd.DataFrame(rows)


def _context(
    study: SimulatedStudy,
    tau: float,
    seed: int,
    tr_idx: np.ndarray,
    te_idx: np.ndarray,
    latent_dim: int,
    plvm_params: Mapping[str, Any] | None,
    n_train_neural: int,
) -> dict[str, Any]:
    """The training and test views of one (tau, seed) shared by every model."""
    src = list(study.source_tasks)
    part = study.traces.truncate(frac=tau)
    srcs, tgt = part.select_tasks(src), part.select_tasks([study.target_task])
    full = study.traces.select_tasks(src)
    return {
        "train": srcs.subset(tr_idx), "test": srcs.subset(te_idx),
        "train_full": full.subset(tr_idx), "test_full": full.subset(te_idx),
        "target_train": tgt.subset(tr_idx), "target_test": tgt.subset(te_idx),
        "target": study.target_task, "y_train": study.y[tr_idx],
        "z_train": study.z[tr_idx], "z_test": study.z[te_idx], "seed": seed,
        "latent_dim": latent_dim, "plvm_params": dict(plvm_params or {}),
        "n_train_neural": n_train_neural,
    }  # fmt: skip


def _known(name: str) -> str:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {list(MODELS)}")
    return name
