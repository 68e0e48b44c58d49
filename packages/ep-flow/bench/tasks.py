"""Helpers of bench/run.py: one seed of the synthetic disordered-CSP benchmark."""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from ep_flow import ODM, EPFlow, EPFlowConfig, condition_of, make_splits, train_flow
from ep_flow.baselines import (
    IndependenceCoupling,
    LinearDoubleCenteredFlow,
    OrderedCSPFlow,
    RowSimplexFlow,
)
from ep_flow.data import A_POOL, ANIONS
from ep_flow.metrics import (
    composition_match,
    match_rate,
    occupancy_validity,
    site_occupancy_error,
    sparsity_recall,
)

LEARNED = {
    "ep_flow": EPFlow,
    "ordered_csp": OrderedCSPFlow,
    "row_simplex": RowSimplexFlow,
    "linear_dc": LinearDoubleCenteredFlow,
}
MODES = np.array([0.0, 0.5, 1.0])


def col_error(odms: list[ODM]) -> float:
    """Mean over samples of the max |column sum - c| (the species-total constraint)."""
    return float(np.mean([np.abs(o.P.sum(0) - o.c).max() for o in odms]))


def disorder_metrics(samples: list[list[ODM]], test: list[ODM]) -> tuple[float, float]:
    """Site-occupancy error and sparsity recall on the disordered test crystals."""
    idx = [i for i, t in enumerate(test) if not np.all(np.isin(t.P, (0.0, 1.0)))]
    err = [site_occupancy_error(samples[i][0], test[i]) for i in idx]
    rec = [sparsity_recall(samples[i][0], test[i]) for i in idx]
    return float(np.mean(err)), float(np.nanmean(rec))


def inversion_mode(odm: ODM, a_symbol: str) -> float:
    """Nearest inversion degree x in {0, 0.5, 1} of a spinel sample, from its cation rows.

    The 6 cation rows of the primitive cell hold A occupancies (1-x, 1-x, x/2 x 4); the sorted
    A column of the sample's 6 most cationic rows is compared with each pattern (L1).
    """
    cols = [k for k, s in enumerate(odm.species) if s is not None]
    anion = [k for k in cols if odm.species[k].symbol in ANIONS]
    a_col = next(k for k in cols if odm.species[k].symbol == a_symbol)
    cation_rows = np.argsort(odm.P[:, anion].sum(1))[:6]
    got = np.sort(odm.P[cation_rows, a_col])
    dist = [np.abs(got - np.sort([1 - x, 1 - x] + [x / 2] * 4)).sum() for x in MODES]
    return float(MODES[int(np.argmin(dist))])


def two_modes(samples: list[list[ODM]], test: list[ODM]) -> tuple[float, int]:
    """Share of spinel formulas with two test inversion modes whose samples show both."""
    groups: dict[tuple, list[int]] = {}
    for i, t in enumerate(test):
        if t.info["prototype"] == "spinel":
            groups.setdefault(tuple(t.info["elements"]), []).append(i)
    hits = []
    for idx in groups.values():
        xs = {test[i].info["inversion"] for i in idx}
        if len(xs) < 2:
            continue
        a = next(e for e in test[idx[0]].info["elements"] if e in A_POOL)
        seen = {inversion_mode(o, a) for o in samples[idx[0]]}
        hits.append(xs <= seen)
    return (float(np.mean(hits)) if hits else float("nan")), len(hits)


def curve_callback(conds: list, test: list[ODM], cfg: dict, seed: int, out: dict) -> object:
    """A ``train_flow`` callback writing the test Match@1 (1 sample) at ``curve@<step>``.

    Its evaluation time is kept apart (``curve_s``) so the training time per step stays clean.
    """

    def callback(step: int, model: EPFlow) -> None:
        t = time.perf_counter()
        flat = model.sample(conds, cfg["ode_steps"], 1, seed)
        out[f"curve@{step}"], _ = match_rate([[o] for o in flat], test)
        out["curve_s"] = out.get("curve_s", 0.0) + time.perf_counter() - t

    return callback


def run_seed(cfg: dict, seed: int) -> dict[str, float]:
    """Train every learned model on one split, sample, measure."""
    t0 = time.perf_counter()
    train, test, meta = make_splits(cfg["n_train"], cfg["n_test"], seed)
    out: dict[str, float] = {"data_s": time.perf_counter() - t0, **meta}
    conds = [condition_of(o) for o in test]
    flows = {}
    for name, cls in LEARNED.items():
        torch.manual_seed(seed)
        model = cls(EPFlowConfig(width=cfg["width"], n_layers=cfg["layers"], n_heads=cfg["heads"],
                                 lam_f=cfg["lam_f"]))  # fmt: skip
        every = cfg["curve_every"] if name == "ep_flow" else 0
        cb = curve_callback(conds, test, cfg, seed, out) if every else None
        t = time.perf_counter()
        losses = train_flow(model, train, cfg["steps"], cfg["batch"], cfg["lr"], seed,
                            schedule=cfg["schedule"], progress=False, callback=cb,
                            callback_every=every)  # fmt: skip
        spent = time.perf_counter() - t - (out.get("curve_s", 0.0) if every else 0.0)
        out[f"{name}/train_ms_per_step"] = 1e3 * spent / cfg["steps"]
        out[f"{name}/final_loss"] = float(np.mean(losses[-50:]))
        k = cfg["samples"] if name == "ep_flow" else 1
        t = time.perf_counter()
        flat = model.sample(conds, cfg["ode_steps"], k, seed)
        out[f"{name}/sample_ms"] = 1e3 * (time.perf_counter() - t) / len(flat)
        flows[name] = (model, [flat[i * k : (i + 1) * k] for i in range(len(test))])
        print(f"  [seed {seed}] {name} done at {time.perf_counter() - t0:.0f} s", file=sys.stderr,
              flush=True)  # fmt: skip
    ind = IndependenceCoupling(flows["ep_flow"][0]).sample(conds, cfg["ode_steps"], 1, seed)
    flows["independence"] = (None, [[o] for o in ind])
    for name, (_, samples) in flows.items():
        first = [s[0] for s in samples]
        out[f"{name}/validity"], out[f"{name}/marginal_error"] = occupancy_validity(first)
        out[f"{name}/column_error"] = col_error(first)
        out[f"{name}/composition_match"] = composition_match(first)
        out[f"{name}/match@1"], out[f"{name}/rms@1"] = match_rate([s[:1] for s in samples], test)
        out[f"{name}/match@1_strict"], _ = match_rate([s[:1] for s in samples], test, 0.01)
        out[f"{name}/site_occ_error"], out[f"{name}/sparsity_recall"] = disorder_metrics(
            samples, test
        )
    ep = flows["ep_flow"][1]
    out["ep_flow/match@5"], out["ep_flow/rms@5"] = match_rate(ep, test)
    out["ep_flow/spinel_both_modes"], out["n_two_mode_spinels"] = two_modes(ep, test)
    out["total_s"] = time.perf_counter() - t0
    return out
