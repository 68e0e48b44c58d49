"""Time of esensc's explain against the model's own predict on exactly the same masked rows.

For each explained row ESENSC evaluates (2n + 1)·B masked rows (+ B once for v(∅)). The
model-only time feeds the model those very rows, built untimed in the blocks the explainer
uses, so the ratio is esensc's overhead beyond the model's own evaluation: building the rows,
checking the outputs, averaging, and the rule.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

import esensc
from esensc._game import DEFAULT_MAX_ELEMENTS, leave_one_out_builder
from methodkit.bench import Outcome, ResultRow, check

MIN_TIMED_S = 0.1  # shorter model times measure the fixed cost per call, not the rows


def friedman_xgb(n: int, seed: int, trees: int) -> tuple[Any, np.ndarray, np.ndarray]:
    """XGBoost (depth 4) on make_friedman1 with n features; its 500 training rows and 100 others."""
    import xgboost as xgb
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=600, n_features=n, noise=1.0, random_state=seed)
    model = xgb.XGBRegressor(n_estimators=trees, max_depth=4, n_jobs=1, random_state=seed)
    return model.fit(X[:500], y[:500]), X[:500], X[500:]


def model_only_seconds(f: Any, bg: np.ndarray, X: np.ndarray) -> float:
    """Seconds the model spends on ESENSC's masked rows (and v(∅)'s B rows), built untimed."""
    B, n = bg.shape
    per_block = max(1, max(B, DEFAULT_MAX_ELEMENTS // n) // B)  # the explainer's blocks
    build, pairs = leave_one_out_builder(X, bg), len(X) * (2 * n + 1)
    t0 = time.perf_counter()
    f(bg)
    total = time.perf_counter() - t0
    for q0 in range(0, pairs, per_block):
        Z = build(q0, min(q0 + per_block, pairs)).reshape(-1, n)
        t0 = time.perf_counter()
        f(Z)
        total += time.perf_counter() - t0
    return total


def overhead_ratio(f: Any, bg: np.ndarray, X: np.ndarray, repeats: int) -> tuple[float, float]:
    """(best esensc seconds, best model-only seconds), alternating the two ``repeats`` times."""
    best_e = best_m = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        esensc.Explainer(f, bg).attribute(X)  # a new explainer: v(∅) is timed on both sides
        best_e = min(best_e, time.perf_counter() - t0)
        best_m = min(best_m, model_only_seconds(f, bg, X))
    return float(best_e), float(best_m)


class CountingModel:
    """Counts the model rows it evaluates (to check (2n + 1)·B·rows + B)."""

    def __init__(self, f: Any) -> None:
        self.f, self.rows = f, 0

    def __call__(self, Z: np.ndarray) -> Any:
        self.rows += len(Z)
        return self.f(Z)


def overhead_benchmark(args: Any) -> Outcome:
    """esensc's explain vs the model's predict on the same masked rows, at n = 64, 256, 1024."""
    ns = [16, 32, 64] if args.quick else [64, 256, 1024]
    B, trees, repeats = (8, 20, 1) if args.quick else (50, 200, 3)
    vals: dict[tuple[str, str], list[float]] = {}
    rows_ok = True
    for seed in args.seeds:
        for n in ns:
            R = 1 if args.quick else max(2, 2048 // n)  # about the same model rows at every n
            model, Xtr, Xte = friedman_xgb(n, seed, trees)
            bg = Xtr[np.random.default_rng(seed).choice(len(Xtr), B, replace=False)]
            f = lambda Z, m=model: m.predict(Z, output_margin=True)  # noqa: E731
            counted = CountingModel(f)
            esensc.Explainer(counted, bg).attribute(Xte[:R])
            rows_ok &= counted.rows == (2 * n + 1) * B * R + B
            t_e, t_m = overhead_ratio(f, bg, Xte[:R], repeats)
            for method, v in ((f"esensc n={n}", t_e), (f"model predict n={n}", t_m)):
                vals.setdefault((method, "time_s"), []).append(v)
            vals.setdefault((f"esensc / model n={n}", "time_ratio"), []).append(t_e / t_m)
    mean = {key: float(np.mean(v)) for key, v in vals.items()}
    claims = [
        check(
            "ESENSC evaluates exactly (2n+1)·B·rows + B model rows at every n",
            rows_ok,
            f"counted at n={ns}: {'all equal' if rows_ok else 'mismatch'}",
            quick=True,  # an exact count: it holds at any scale
        )
    ]
    for n in ns:
        t_e, t_m = mean[(f"esensc n={n}", "time_s")], mean[(f"model predict n={n}", "time_s")]
        claims.append(
            check(
                f"n={n}: ESENSC time <= 1.15 x the model's own predict on its (2n+1)·B masked "
                "rows per explained row (overhead <= 15 %)",
                t_e <= 1.15 * t_m,
                f"esensc {t_e:.3f} s vs predict {t_m:.3f} s: ratio {t_e / t_m:.3f}",
                inputs=[t_e, t_m],
                degenerate=t_m < MIN_TIMED_S,  # milliseconds (--quick) time the fixed costs
            )
        )
    config = {"n_features": ns, "n_background": B, "n_explain": "max(2, 2048 // n)", "trees": trees,
              "max_depth": 4, "repeats": f"best of {repeats}, alternating esensc / predict",
              "model_rows_per_explained_row": "(2n+1)·B"}  # fmt: skip
    hib = {"time_s": False, "time_ratio": False}
    rows = [ResultRow.from_values(m, k, v, hib[k]) for (m, k), v in vals.items()]
    return Outcome(config, rows, claims, plot_metrics=["time_ratio"])
