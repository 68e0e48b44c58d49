"""Data, models, ground truth and metrics of bench/run.py (script helpers, not in the wheel)."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

import esensc
from esensc.baselines import kernel_shap, permutation_shap


@dataclass(frozen=True)
class Config:
    """One accuracy benchmark: a dataset and a model kind."""

    name: str
    dataset: str
    model: str  # "mlp" or "xgb"


def load(dataset: str, seed: int, n_explain: int) -> tuple[Any, Any, Any, str]:
    """Standardised train split, its targets, ``n_explain`` test rows and the task kind."""
    from sklearn import datasets
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    if dataset == "diabetes":
        X, y = datasets.load_diabetes(return_X_y=True)
        y = (y - y.mean()) / y.std()
        task = "regression"
    elif dataset == "wine":
        X, y = datasets.load_wine(return_X_y=True)
        y = (y == 0).astype(int)  # class 0 vs rest
        task = "classification"
    else:
        X, y = datasets.load_breast_cancer(return_X_y=True)
        task = "classification"
    Xtr, Xte, ytr, _ = train_test_split(
        X, y, test_size=0.3, random_state=seed, stratify=y if task == "classification" else None
    )
    sc = StandardScaler().fit(Xtr)
    Xtr, Xte = sc.transform(Xtr), sc.transform(Xte)
    return Xtr, ytr, Xte[:n_explain], task


def train(
    cfg: Config, Xtr: Any, ytr: Any, task: str, seed: int, quick: bool
) -> tuple[Any, str, Any]:
    """Return (f, link, model): f maps (m, n) -> (m,) on the scale before the link."""
    if cfg.model == "mlp":
        from sklearn.neural_network import MLPClassifier, MLPRegressor

        # the spec's models: MLP(64, 64) with scikit-learn's other defaults (max_iter=200)
        kw = dict(hidden_layer_sizes=(64, 64), random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning at max_iter=200
            if task == "regression":
                m = MLPRegressor(**kw).fit(Xtr, ytr)
                return m.predict, "identity", m
            m = MLPClassifier(**kw).fit(Xtr, ytr)
        # clip so the log-odds stay finite for every method alike (the same game for all)
        return (lambda Z: np.clip(m.predict_proba(Z)[:, 1], 1e-9, 1 - 1e-9)), "logit", m
    import xgboost as xgb

    kw = dict(n_estimators=40 if quick else 200, max_depth=4, n_jobs=1, random_state=seed)
    if task == "regression":
        m = xgb.XGBRegressor(**kw).fit(Xtr, ytr)
    else:
        m = xgb.XGBClassifier(**kw).fit(Xtr, ytr)
    return (lambda Z: m.predict(Z, output_margin=True)), "identity", m


@dataclass(frozen=True)
class Problem:
    """One seed of one benchmark: model, background, explained rows and the game's link."""

    f: Callable[[Any], Any]
    link: str
    model: Any
    bg: np.ndarray
    X: np.ndarray


@cache
def problem(cfg: Config, seed: int, quick: bool) -> Problem:
    """The seed's trained model, B background rows and explained rows (cached per process)."""
    B, R = (12, 6) if quick else (50, 40)
    Xtr, ytr, X, task = load(cfg.dataset, seed, R)
    bg = Xtr[np.random.default_rng(seed).choice(len(Xtr), B, replace=False)]
    f, link, model = train(cfg, Xtr, ytr, task, seed, quick)
    return Problem(f, link, model, bg, X)


@cache
def raw_table(cfg: Config, seed: int, quick: bool) -> tuple[np.ndarray, float]:
    """All 2^n background-averaged outputs (before the link), (rows, 2^n), and the time taken.

    The exact SHAP of both scales (probability and log-odds) comes from this one table.
    """
    p = problem(cfg, seed, quick)
    t0 = time.perf_counter()
    v, _ = esensc.game_values(p.f, p.bg, p.X)
    return v[:, 0, :], time.perf_counter() - t0


def logit(p: np.ndarray) -> np.ndarray:
    """log(p / (1 - p))."""
    return np.log(p) - np.log1p(-p)


def order3_shapley_share(v: np.ndarray) -> float:
    """Mean over rows of ‖φ^(>=3)‖² / ‖φ‖²: the part of exact SHAP from order >= 3 interactions.

    ``φ_i = Σ_{T∋i} d_T / |T|`` over the Harsanyi dividends ``d_T`` of the game (rows, 2^n);
    ``φ^(>=3)`` keeps the ``|T| >= 3`` terms. ESENSC is exact when this share is 0.
    """
    d = np.array(v, dtype=np.float64)
    n = int(np.log2(d.shape[-1]))
    subsets = np.arange(d.shape[-1])
    for i in range(n):  # Möbius transform, one feature at a time
        with_i = (subsets >> i) & 1 == 1
        d[..., with_i] -= d[..., ~with_i]
    size = np.array([bin(s).count("1") for s in subsets])
    member = ((subsets[:, None] >> np.arange(n)) & 1).astype(float)  # (2^n, n)
    per = d / np.maximum(size, 1)
    phi = per @ member
    high = (per * (size >= 3)) @ member
    return float(np.mean((high**2).sum(-1) / np.maximum((phi**2).sum(-1), 1e-300)))


def tree_truth(model: Any, bg: Any, X: Any) -> Any:
    """Interventional TreeSHAP values of an XGBoost model (the ground truth for trees)."""
    import shap

    te = shap.TreeExplainer(model, data=bg, feature_perturbation="interventional")
    return np.asarray(te.shap_values(X))


def metrics(phi: Any, truth: Any, fx: Any) -> tuple[float, float, float]:
    """Normalised deviation, mean per-row Spearman and top-5 overlap of ``phi`` vs ``truth``."""
    from scipy.stats import spearmanr

    var = float(np.var(fx))
    dev = float(np.mean(np.sum((phi - truth) ** 2, axis=1)) / var)
    rhos, tops = [], []
    k = min(5, phi.shape[1])
    for p, t in zip(phi, truth, strict=True):
        if np.ptp(p) == 0 or np.ptp(t) == 0:
            rhos.append(1.0 if np.allclose(p, t) else 0.0)
        else:
            rhos.append(float(spearmanr(p, t).statistic))
        tops.append(len(set(np.argsort(-np.abs(p))[:k]) & set(np.argsort(-np.abs(t))[:k])) / k)
    return dev, float(np.mean(rhos)), float(np.mean(tops))


def warm_up_shap() -> None:
    """Run shap's explainers once on a toy problem so numba JIT time is not counted."""
    bg, X = np.zeros((2, 3)), np.ones((1, 3))
    f = lambda Z: Z.sum(1)  # noqa: E731
    kernel_shap(f, bg, X, 8)
    permutation_shap(f, bg, X, 8)


def timed(fn: Callable[..., Any], *a: Any, **kw: Any) -> tuple[Any, float]:
    """``fn(*a, **kw)`` and its wall time in seconds."""
    t0 = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t0
