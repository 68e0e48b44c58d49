"""One seed of each preg benchmark: the arithmetic-chain world and the path simulator.

``run.py`` turns what these return into records and claims. Every random draw is seeded by
the run seed (problem generation, pool sampling, replay resamples, the live run).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from methodkit.bench import ResultRow
from preg import (
    BestOfN,
    DeepConfOffline,
    PrefixConfidenceBestOf,
    PrefixGuidedSampler,
    RegexExtractor,
    ReplayPool,
    SelfConsistency,
    path_score,
)
from preg.generators.sim import PathSimulator, SimConfig
from preg.generators.toy import TinyLMGenerator
from preg.toy import make_problem, train_tiny_lm

BETA = 20.0
MAX_NEW = 48
EX = RegexExtractor(r"A(\d+)\.", cast=int)

#: ``make(generator) -> method`` with a ``.run(prompt, seed=...)``.
MakeMethod = Callable[[Any], Any]


def accuracy_cost_rows(
    per_seed: list[dict], cost_metric: str
) -> tuple[dict[str, list[float]], dict[str, list[float]], list[ResultRow]]:
    """Per-method accuracy and mean generated length over seeds, and their result rows."""
    names = list(per_seed[0]["res"])
    acc = {n: [s["res"][n].accuracy for s in per_seed] for n in names}
    cost = {n: [s["res"][n].mean_tokens for s in per_seed] for n in names}
    rows = []
    for n in names:
        rows.append(ResultRow.from_values(n, "accuracy", acc[n], True))
        rows.append(ResultRow.from_values(n, cost_metric, cost[n], False))
    return acc, cost, rows


def log(msg: str) -> None:
    """Progress to stderr (stdout carries the tables)."""
    print(msg, file=sys.stderr, flush=True)


def within_question_auroc(scores: list[np.ndarray], correct: list[np.ndarray]) -> float:
    """Mean over questions of P(score of a correct path > score of a wrong one); NaN if none."""
    vals = []
    for s, c in zip(scores, correct, strict=True):
        pos, neg = s[c], s[~c]
        if len(pos) == 0 or len(neg) == 0:
            continue
        diff = pos[:, None] - neg[None, :]
        vals.append(float(((diff > 0) + 0.5 * (diff == 0)).mean()))
    return float(np.mean(vals)) if vals else float("nan")


def interp(ms: list[int], accs: np.ndarray, m: float) -> np.ndarray:
    """Linear interpolation in M of an accuracy curve (last axis = M grid)."""
    m = min(max(m, ms[0]), ms[-1])
    j = int(np.searchsorted(ms, m))
    if j == 0 or ms[j] == m:
        return accs[..., j]
    t = (m - ms[j - 1]) / (ms[j] - ms[j - 1])
    return (1 - t) * accs[..., j - 1] + t * accs[..., j]


def toy_grid(quick: bool) -> tuple[dict[str, Any], list[int], list[tuple[int, int, int]]]:
    """The arithmetic-world configuration, the SC sizes and the PreG (N, K, L) grid."""
    if quick:
        cfg = dict(train_steps=60, n_problems=16, pool=16, resamples=2, n_live=8)
        sc_ms = [1, 2, 4, 8, 12, 16]
        preg_grid = [(8, 4, 16), (16, 4, 16), (16, 8, 8)]
    else:
        cfg = dict(train_steps=800, n_problems=200, pool=32, resamples=6, n_live=100)
        sc_ms = [1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 32]
        preg_grid = [
            (n, k, ell) for ell in (8, 16) for n in (8, 16, 32) for k in (2, 4, 8, 16) if k <= n
        ]
    return cfg, sc_ms, preg_grid


def toy_methods(
    sc_ms: list[int], preg_grid: list[tuple[int, int, int]], pool: int
) -> dict[str, MakeMethod]:
    """Every method replayed on the pool: SC, cwSC, BoN, prefix best-of, DeepConf, PreG."""
    methods: dict[str, MakeMethod] = {}
    for m in sc_ms:
        methods[f"SC@{m}"] = lambda g, m=m: SelfConsistency(g, EX, n=m, max_new_tokens=MAX_NEW)
        methods[f"cwSC@{m}"] = lambda g, m=m: SelfConsistency(
            g, EX, n=m, max_new_tokens=MAX_NEW, weighted=True, beta=BETA
        )
    for m in [m for m in (8, 16, 32) if m <= pool]:
        methods[f"BoN@{m}"] = lambda g, m=m: BestOfN(g, EX, n=m, max_new_tokens=MAX_NEW)
        methods[f"prefix-best-of N{m} L16"] = lambda g, m=m: PrefixConfidenceBestOf(
            g, EX, n_prefixes=m, prefix_len=16, max_new_tokens=MAX_NEW
        )
        for kf in (0.5, 0.9):
            methods[f"DeepConf{int(kf * 100)}@{m}"] = lambda g, m=m, kf=kf: DeepConfOffline(
                g, EX, n=m, max_new_tokens=MAX_NEW, keep_frac=kf, window=8, k=5
            )
    for n, k, ell in preg_grid:
        if n > pool:
            continue
        methods[f"PreG N{n} K{k} L{ell}"] = lambda g, n=n, k=k, ell=ell: PrefixGuidedSampler(
            g, EX, n_prefixes=n, prefix_len=ell, keep=k, max_new_tokens=MAX_NEW, beta=BETA
        )
    return methods


def toy_seed(
    seed: int,
    cfg: dict[str, Any],
    methods: dict[str, MakeMethod],
    head: tuple[int, int, int],
    cache: Path,
) -> dict[str, Any]:
    """Train (or load) the tiny LM, sample one pool, replay every method, run PreG live.

    Returns:
        ``res`` (replay results by method), ``psa`` (per-sample accuracy per question),
        ``auroc`` (by prefix length and score), ``mean_len``, ``live`` and ``replay_live``
        (accuracy of the headline PreG live and replayed on the first problems) and ``ci``
        (the live accuracy's bootstrap 95 % interval).
    """
    t0 = time.perf_counter()
    model = train_tiny_lm(cfg["train_steps"], seed=seed, cache_dir=cache)
    log(f"[toy] seed {seed}: trained in {time.perf_counter() - t0:.0f}s")
    gen = TinyLMGenerator(model)
    rng = np.random.default_rng(10_000 + seed)
    probs = [make_problem(rng) for _ in range(cfg["n_problems"])]
    t0 = time.perf_counter()
    paths = []
    for s in range(0, len(probs), 100):
        chunk = probs[s : s + 100]
        paths += gen.sample_batch(
            [p.prompt for p in chunk], cfg["pool"], MAX_NEW, seed=seed * 7 + s
        )
    for pl in paths:
        for p in pl:
            p.answer = EX(p.text)
    log(f"[toy] seed {seed}: pool sampled in {time.perf_counter() - t0:.0f}s")
    gold = [p.answer for p in probs]
    pool = ReplayPool([p.prompt for p in probs], paths, gold)
    psa = pool.per_sample_accuracy(EX)
    correct = [np.array([p.answer == g for p in pl]) for pl, g in zip(paths, gold, strict=True)]
    mean_len = float(np.mean([p.n_tokens for pl in paths for p in pl]))
    auroc = {}
    for name, ell, kind in [
        ("L8", 8, "logprob"),
        ("L16", 16, "logprob"),
        ("full", MAX_NEW, "logprob"),
        ("L16_negent", 16, "neg_entropy"),
    ]:
        sc = [np.array([path_score(p.truncate(ell), kind) for p in pl]) for pl in paths]
        auroc[name] = within_question_auroc(sc, correct)
    t0 = time.perf_counter()
    res = {name: pool.evaluate(f, cfg["resamples"], seed=seed) for name, f in methods.items()}
    log(f"[toy] seed {seed}: {len(methods)} methods replayed in {time.perf_counter() - t0:.0f}s")
    # live PreG on the first problems must match its replay accuracy
    hn, hk, hl = head
    live_s = PrefixGuidedSampler(
        gen, EX, n_prefixes=hn, prefix_len=hl, keep=hk, max_new_tokens=MAX_NEW, beta=BETA
    )
    nl = cfg["n_live"]
    live = np.array(
        [
            float(live_s.run(p.prompt, seed=seed * 100_000 + i).answer == p.answer)
            for i, p in enumerate(probs[:nl])
        ]
    )
    replay_live = res[f"PreG N{hn} K{hk} L{hl}"].per_question[:nl].mean()
    boot = np.random.default_rng(seed).choice(live, size=(2000, nl)).mean(1)
    ci = (float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975)))
    return dict(
        res=res,
        psa=psa,
        auroc=auroc,
        mean_len=mean_len,
        live=float(live.mean()),
        replay_live=float(replay_live),
        ci=ci,
    )


def sim_seed(seed: int, n_questions: int, resamples: int, bins: np.ndarray) -> dict[str, Any]:
    """PreG N32/K8/L8 minus equal-budget SC@14 on simulated questions, with and without signal.

    Returns:
        ``gain`` and ``gain_null`` (mean per-question gain at ``delta_prefix`` 0.5 and 0),
        ``gain_by_bin`` (the 0.5 gain per difficulty bin, NaN for an empty bin) and
        ``null_accuracy`` (PreG's and SC's accuracy at ``delta_prefix`` 0).
    """
    out: dict[str, Any] = {}
    for dp, key in ((0.5, "gain"), (0.0, "gain_null")):
        sim = PathSimulator(
            SimConfig(n_questions=n_questions, pool_size=64, delta_prefix=dp), seed=seed
        )
        qs = sim.questions
        pool = ReplayPool([q.prompt for q in qs], [q.paths for q in qs], [q.answer for q in qs])
        preg = pool.evaluate(
            lambda g: PrefixGuidedSampler(
                g, EX, n_prefixes=32, prefix_len=8, keep=8, max_new_tokens=32, weight="uniform"
            ),
            resamples,
            seed=seed,
        )
        sc = pool.evaluate(
            lambda g: SelfConsistency(g, EX, n=14, max_new_tokens=32), resamples, seed=seed
        )
        g = preg.per_question - sc.per_question
        out[key] = float(g.mean())
        if key == "gain":
            ps = np.array([q.p for q in qs])
            idx = np.digitize(ps, bins) - 1
            out["gain_by_bin"] = [
                float(g[idx == b].mean()) if (idx == b).any() else np.nan for b in range(10)
            ]
        else:
            out["null_accuracy"] = (float(preg.accuracy), float(sc.accuracy))
    return out
