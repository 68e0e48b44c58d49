"""The saturating wine MLP explained as a probability and as log-odds, from one coalition table.

Both games come from the same 2^n background-averaged probabilities (``tasks.raw_table``):
the probability game is the table, the log-odds game its logit (shap's ``link=logit`` with
``linearize_link=False``). For each scale: ESENSC against that scale's exact SHAP, how uniform
the attributions are (coefficient of variation of |φ| across features, ESENSC / exact), the
share of near-flat rows, whether the explainer warned, the dividend share of order >= 3, and
the log-odds Spearman split by saturated (p > 0.99 or < 0.01) and other rows.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from tasks import Config, logit, metrics, order3_shapley_share, problem, raw_table

import esensc
from methodkit.bench import Outcome, ResultRow, compare

WINE = Config("wine_mlp", "wine", "mlp")
SCALES = {"probability": "identity", "log-odds": "logit"}


def _cv(phi: np.ndarray) -> float:
    a = np.abs(phi)
    return float(np.mean(a.std(1) / np.maximum(a.mean(1), 1e-300)))


def _one_scale(f: Any, bg: np.ndarray, X: np.ndarray, game: np.ndarray, link: str) -> dict:
    truth = esensc.shapley_from_values(game)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ex = esensc.Explainer(f, bg, link=link)
        phi = ex.attribute(X)
    fx = f(X) if link == "identity" else logit(f(X))
    dev, rho, _ = metrics(phi, truth, fx)
    return {
        "deviation": dev,
        "spearman": rho,
        "uniformity_cv_ratio": _cv(phi) / _cv(truth),
        "near_flat_rows": float(np.mean(ex.equal_split_share > 0.5)),
        "warned": float(any("near-flat" in str(w.message) for w in caught)),
        "order3_shapley_share": order3_shapley_share(game),
        "phi": phi,
        "truth": truth,
    }


def saturation_benchmark(args: Any) -> Outcome:
    """Probability versus log-odds game of the wine MLP (class 0 vs rest)."""
    vals: dict[tuple[str, str], list[float]] = {}
    for seed in args.seeds:
        p = problem(WINE, seed, args.quick)
        table, _ = raw_table(WINE, seed, args.quick)
        px = p.f(p.X)
        saturated = (px > 0.99) | (px < 0.01)
        vals.setdefault(("explained rows", "saturated_share"), []).append(float(saturated.mean()))
        for scale, link in SCALES.items():
            game = table if link == "identity" else logit(table)
            res = _one_scale(p.f, p.bg, p.X, game, link)
            for metric in ("deviation", "spearman", "uniformity_cv_ratio", "near_flat_rows",
                           "warned", "order3_shapley_share"):  # fmt: skip
                vals.setdefault((f"esensc {scale}", metric), []).append(res[metric])
            if link == "logit":
                for name, rows in (("saturated", saturated), ("other", ~saturated)):
                    if rows.any():
                        _, rho, _ = metrics(res["phi"][rows], res["truth"][rows], logit(px))
                        vals.setdefault((f"esensc log-odds, {name} rows", "spearman"), []).append(
                            rho
                        )
    hib = {"deviation": False, "spearman": True, "uniformity_cv_ratio": None,
           "near_flat_rows": None, "warned": None, "order3_shapley_share": None,
           "saturated_share": None}  # fmt: skip
    rows = [ResultRow.from_values(m, k, v, hib[k]) for (m, k), v in vals.items()]
    rho = {s: float(np.mean(vals[(f"esensc {s}", "spearman")])) for s in SCALES}
    claims = [
        compare(
            "saturated wine MLP: ESENSC ranks features closer to exact SHAP on the log-odds "
            "scale than on the probability scale (Spearman, each against its own scale)",
            rho["log-odds"],
            ">",
            rho["probability"],
            measured=f"spearman log-odds {rho['log-odds']:.3f} vs probability "
            f"{rho['probability']:.3f}",
        )
    ]
    B, R = (12, 6) if args.quick else (50, 40)
    config = {
        "dataset": "wine (class 0 vs rest)", "model": "MLPClassifier(64, 64)",
        "n_background": B, "n_explain": R,
        "scales": "probability (link identity) and log-odds (link logit, after averaging)",
        "truth": "exact Shapley of each scale's game from one 2^n table",
        "uniformity_cv_ratio": "mean CV of |phi| across features, ESENSC / exact (1 = as varied)",
        "near_flat_rows": "share of rows with equal-split share > 0.5 (esensc.diagnostics)",
    }  # fmt: skip
    return Outcome(config, rows, claims, plot_metrics=["spearman", "uniformity_cv_ratio"])
