"""PreG reproduction: arithmetic-chain world with a tiny char LM, plus the path simulator.

    uv run python packages/preg/bench/run.py --threads 1               # full (3 seeds)
    uv run python packages/preg/bench/run.py --quick --seeds 0         # smoke run (< 40 s)

Writes ``arith_toy`` (accuracy vs generated characters for every method, on one shared sample
pool per seed, replayed) and ``simulator`` (gain over equal-budget SC vs question difficulty).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from methodkit.bench import (
    BenchRecord,
    Claim,
    ResultRow,
    bench_parser,
    environment,
    finish,
    plot_results,
    save_record,
    set_threads,
)

PKG = "preg"
BETA = 20.0
MAX_NEW = 48


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _row(method: str, metric: str, values: list[float], hib: bool) -> list[ResultRow]:
    vals = [float(v) for v in values if math.isfinite(v)]
    return [ResultRow.from_values(method, metric, vals, hib)] if vals else []


def within_question_auroc(scores: list[np.ndarray], correct: list[np.ndarray]) -> float:
    vals = []
    for s, c in zip(scores, correct, strict=True):
        pos, neg = s[c], s[~c]
        if len(pos) == 0 or len(neg) == 0:
            continue
        diff = pos[:, None] - neg[None, :]
        vals.append(float(((diff > 0) + 0.5 * (diff == 0)).mean()))
    return float(np.mean(vals)) if vals else float("nan")


def _interp(ms: list[int], accs: np.ndarray, m: float) -> np.ndarray:
    """Linear interpolation in M of an accuracy curve (last axis = M grid)."""
    m = min(max(m, ms[0]), ms[-1])
    j = int(np.searchsorted(ms, m))
    if j == 0 or ms[j] == m:
        return accs[..., j]
    t = (m - ms[j - 1]) / (ms[j] - ms[j - 1])
    return (1 - t) * accs[..., j - 1] + t * accs[..., j]


def bench_toy(
    seeds: list[int], quick: bool
) -> tuple[dict[str, Any], list[ResultRow], list[Claim], dict]:
    import torch

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
    from preg.generators.toy import TinyLMGenerator
    from preg.toy import make_problem, train_tiny_lm

    ex = RegexExtractor(r"A(\d+)\.", cast=int)
    if quick:
        cfg = dict(train_steps=60, n_problems=30, pool=16, resamples=2, n_live=20)
        sc_ms = [1, 2, 4, 8, 12, 16]
        preg_grid = [(8, 4, 16), (16, 4, 16), (16, 8, 8)]
    else:
        cfg = dict(train_steps=800, n_problems=200, pool=32, resamples=6, n_live=100)
        sc_ms = [1, 2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 32]
        preg_grid = [
            (n, k, ell) for ell in (8, 16) for n in (8, 16, 32) for k in (2, 4, 8, 16) if k <= n
        ]
    if TRAIN_STEPS is not None:
        cfg["train_steps"] = TRAIN_STEPS
    cfg.update(max_new_tokens=MAX_NEW, beta=BETA, temperature=1.0, score="logprob mean")
    head = (16, 4, 16) if (16, 4, 16) in preg_grid else preg_grid[0]
    cache = Path(ARGS_OUT) / "scratch_cache"
    per_seed: list[dict[str, Any]] = []
    for seed in seeds:
        t0 = time.perf_counter()
        model = train_tiny_lm(cfg["train_steps"], seed=seed, cache_dir=cache)
        _log(f"[toy] seed {seed}: trained in {time.perf_counter() - t0:.0f}s")
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
                p.answer = ex(p.text)
        _log(f"[toy] seed {seed}: pool sampled in {time.perf_counter() - t0:.0f}s")
        gold = [p.answer for p in probs]
        pool = ReplayPool([p.prompt for p in probs], paths, gold)
        psa = pool.per_sample_accuracy(ex)
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
        methods: dict[str, Any] = {}
        for m in sc_ms:
            methods[f"SC@{m}"] = lambda g, m=m: SelfConsistency(g, ex, n=m, max_new_tokens=MAX_NEW)
            methods[f"cwSC@{m}"] = lambda g, m=m: SelfConsistency(
                g, ex, n=m, max_new_tokens=MAX_NEW, weighted=True, beta=BETA
            )
        big = [m for m in (8, 16, 32) if m <= cfg["pool"]]
        for m in big:
            methods[f"BoN@{m}"] = lambda g, m=m: BestOfN(g, ex, n=m, max_new_tokens=MAX_NEW)
            methods[f"prefix-best-of N{m} L16"] = lambda g, m=m: PrefixConfidenceBestOf(
                g, ex, n_prefixes=m, prefix_len=16, max_new_tokens=MAX_NEW
            )
            for kf in (0.5, 0.9):
                methods[f"DeepConf{int(kf * 100)}@{m}"] = lambda g, m=m, kf=kf: DeepConfOffline(
                    g, ex, n=m, max_new_tokens=MAX_NEW, keep_frac=kf, window=8, k=5
                )
        for n, k, ell in preg_grid:
            if n > cfg["pool"]:
                continue
            methods[f"PreG N{n} K{k} L{ell}"] = lambda g, n=n, k=k, ell=ell: PrefixGuidedSampler(
                g, ex, n_prefixes=n, prefix_len=ell, keep=k, max_new_tokens=MAX_NEW, beta=BETA
            )
        t0 = time.perf_counter()
        res = {name: pool.evaluate(f, cfg["resamples"], seed=seed) for name, f in methods.items()}
        _log(
            f"[toy] seed {seed}: {len(methods)} methods replayed in {time.perf_counter() - t0:.0f}s"
        )
        # live PreG on the first problems must match its replay accuracy
        hn, hk, hl = head
        live_s = PrefixGuidedSampler(
            gen, ex, n_prefixes=hn, prefix_len=hl, keep=hk, max_new_tokens=MAX_NEW, beta=BETA
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
        per_seed.append(
            dict(
                res=res,
                psa=psa,
                auroc=auroc,
                mean_len=mean_len,
                live=float(live.mean()),
                replay_live=float(replay_live),
                ci=ci,
            )
        )
    # aggregate over seeds
    names = list(per_seed[0]["res"])
    acc = {n: [s["res"][n].accuracy for s in per_seed] for n in names}
    chars = {n: [s["res"][n].mean_tokens for s in per_seed] for n in names}
    rows = []
    for n in names:
        rows.append(ResultRow.from_values(n, "accuracy", acc[n], True))
        rows.append(ResultRow.from_values(n, "generated_chars", chars[n], False))
    for key in per_seed[0]["auroc"]:
        rows += _row(
            f"AUROC {key}", "within_question_auroc", [s["auroc"][key] for s in per_seed], True
        )
    mean = {n: float(np.mean(acc[n])) for n in names}
    mchars = {n: float(np.mean(chars[n])) for n in names}
    pregs = [n for n in names if n.startswith("PreG")]
    ms = sc_ms
    top = max(ms)
    mid = 16 if 16 in ms else ms[len(ms) // 2]
    claims = []
    au = float(np.mean([s["auroc"]["L16"] for s in per_seed]))
    claims.append(
        Claim(
            "within-question prefix log-prob AUROC at prefix 16 >= 0.62",
            bool(au >= 0.62),
            f"AUROC L16 {au:.3f} (L8 {np.mean([s['auroc']['L8'] for s in per_seed]):.3f},"
            f" full {np.mean([s['auroc']['full'] for s in per_seed]):.3f}, neg-entropy"
            f" L16 {np.mean([s['auroc']['L16_negent'] for s in per_seed]):.3f})",
        )
    )
    cheap = [n for n in pregs if mchars[n] <= mchars[f"SC@{mid}"]]
    best = max(cheap, key=lambda n: mean[n]) if cheap else None
    b_acc = mean[best] if best else float("nan")
    claims.append(
        Claim(
            f"best PreG within SC@{mid}'s characters >= SC-majority@{mid} + 0.04",
            bool(best) and bool(b_acc >= mean[f"SC@{mid}"] + 0.04),
            f"{best}: {b_acc:.3f} ({mchars[best]:.0f} chars) vs SC@{mid} "
            f"{mean[f'SC@{mid}']:.3f} ({mchars[f'SC@{mid}']:.0f} chars)"
            if best
            else "none",
        )
    )
    reach = [n for n in pregs if mean[n] >= mean[f"SC@{top}"]]
    cheapest = min(reach, key=lambda n: mchars[n]) if reach else None
    ratio = mchars[cheapest] / mchars[f"SC@{top}"] if cheapest else float("inf")
    claims.append(
        Claim(
            f"PreG reaches SC-majority@{top} accuracy with <= 0.4x its characters",
            bool(ratio <= 0.4),
            f"SC@{top} {mean[f'SC@{top}']:.3f} at {mchars[f'SC@{top}']:.0f} chars; "
            + (
                f"{cheapest} {mean[cheapest]:.3f} at ratio {ratio:.2f}"
                if cheapest
                else "no PreG config reaches it"
            ),
        )
    )
    hname = f"PreG N{head[0]} K{head[1]} L{head[2]}"
    cw, gains_b, gains_o, scq = [], [], [], []
    for s in per_seed:
        m_eq = s["res"][hname].mean_tokens / s["mean_len"]
        cw_curve = np.array([s["res"][f"cwSC@{m}"].accuracy for m in ms])
        cw.append(float(_interp(ms, cw_curve, m_eq)))
        sc_curve = np.array([s["res"][f"SC@{m}"].accuracy for m in ms])
        scq.append(float(_interp(ms, sc_curve, m_eq)))
        per_q = np.stack([s["res"][f"SC@{m}"].per_question for m in ms], axis=-1)
        gain = s["res"][hname].per_question - _interp(ms, per_q, m_eq)
        band = (s["psa"] >= 0.25) & (s["psa"] < 0.6)
        gains_b.append(float(gain[band].mean()) if band.any() else float("nan"))
        gains_o.append(float(gain[~band].mean()) if (~band).any() else float("nan"))
    claims.append(
        Claim(
            f"{hname} >= confidence-weighted SC (beta={BETA:g}) + 0.02 at equal cost",
            bool(mean[hname] >= np.mean(cw) + 0.02),
            f"{mean[hname]:.3f} vs cwSC {np.mean(cw):.3f} (majority SC {np.mean(scq):.3f})"
            f" at M_eq = {mchars[hname] / np.mean([s['mean_len'] for s in per_seed]):.1f}",
        )
    )
    gb = float(np.nanmean(gains_b)) if not np.all(np.isnan(gains_b)) else float("nan")
    go = float(np.nanmean(gains_o)) if not np.all(np.isnan(gains_o)) else float("nan")
    claims.append(
        Claim(
            "gain over equal-cost SC on questions with per-sample accuracy in [0.25, 0.6)"
            " >= 1.5x the gain elsewhere",
            bool(gb > 0 and gb >= 1.5 * go),
            f"band {gb:+.3f}, other {go:+.3f} (band share "
            f"{np.mean([((s['psa'] >= 0.25) & (s['psa'] < 0.6)).mean() for s in per_seed]):.2f})",
        )
    )
    ok = all(s["ci"][0] <= s["replay_live"] <= s["ci"][1] for s in per_seed)
    claims.append(
        Claim(
            f"live {hname} matches its replay accuracy (bootstrap 95% CI)",
            bool(ok),
            "; ".join(
                f"live {s['live']:.3f} CI [{s['ci'][0]:.3f}, {s['ci'][1]:.3f}] "
                f"replay {s['replay_live']:.3f}"
                for s in per_seed
            ),
        )
    )
    cfg["per_sample_accuracy_mean"] = float(np.mean([s["psa"].mean() for s in per_seed]))
    cfg["per_sample_accuracy_quartiles"] = [
        float(x)
        for x in np.quantile(np.concatenate([s["psa"] for s in per_seed]), [0.25, 0.5, 0.75])
    ]
    cfg["headline_preg"] = hname
    cfg["quick"] = quick
    cfg["torch_threads"] = torch.get_num_threads()
    curves = {"mean": mean, "chars": mchars, "std": {n: float(np.std(acc[n])) for n in names}}
    return cfg, rows, claims, curves


def plot_toy_curves(curves: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    mean, chars, std = curves["mean"], curves["chars"], curves["std"]
    for prefix, style in [
        ("SC@", "o-"),
        ("cwSC@", "s-"),
        ("BoN@", "^-"),
        ("DeepConf50@", "v--"),
        ("DeepConf90@", "v:"),
        ("prefix-best-of", "d--"),
    ]:
        ns = sorted((n for n in mean if n.startswith(prefix)), key=lambda n: chars[n])
        if ns:
            ax.errorbar(
                [chars[n] for n in ns],
                [mean[n] for n in ns],
                [std[n] for n in ns],
                fmt=style,
                ms=4,
                capsize=2,
                label=prefix.rstrip("@"),
            )
    for ell, mk in ((8, "x"), (16, "*")):
        ns = [n for n in mean if n.startswith("PreG") and n.endswith(f"L{ell}")]
        if ns:
            ax.errorbar(
                [chars[n] for n in ns],
                [mean[n] for n in ns],
                [std[n] for n in ns],
                fmt=mk,
                ms=7,
                capsize=2,
                label=f"PreG (prefix {ell})",
            )
    ax.set_xscale("log")
    ax.set_xlabel("generated characters per question (log)")
    ax.set_ylabel("accuracy")
    ax.set_title("arithmetic chains: accuracy vs generated characters (replay)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def bench_sim(
    seeds: list[int], quick: bool
) -> tuple[dict[str, Any], list[ResultRow], list[Claim], dict]:
    from preg import PrefixGuidedSampler, RegexExtractor, ReplayPool, SelfConsistency
    from preg.generators.sim import PathSimulator, SimConfig

    ex = RegexExtractor(r"A(\d+)\.", cast=int)
    nq, reps = (150, 3) if quick else (300, 5)
    bins = np.linspace(0.0, 1.0, 11)
    out: dict[str, list] = {"gain_by_bin": [], "gain_null": [], "gain": []}
    for seed in seeds:
        for dp, key in ((0.5, "gain"), (0.0, "gain_null")):
            sim = PathSimulator(SimConfig(n_questions=nq, pool_size=64, delta_prefix=dp), seed=seed)
            qs = sim.questions
            pool = ReplayPool([q.prompt for q in qs], [q.paths for q in qs], [q.answer for q in qs])
            preg = pool.evaluate(
                lambda g: PrefixGuidedSampler(
                    g, ex, n_prefixes=32, prefix_len=8, keep=8, max_new_tokens=32, weight="uniform"
                ),
                reps,
                seed=seed,
            )
            sc = pool.evaluate(
                lambda g: SelfConsistency(g, ex, n=14, max_new_tokens=32), reps, seed=seed
            )
            g = preg.per_question - sc.per_question
            out[key].append(float(g.mean()))
            if key == "gain":
                ps = np.array([q.p for q in qs])
                idx = np.digitize(ps, bins) - 1
                out["gain_by_bin"].append(
                    [float(g[idx == b].mean()) if (idx == b).any() else np.nan for b in range(10)]
                )
    gbb = np.nanmean(np.array(out["gain_by_bin"]), axis=0)
    rows = [
        ResultRow.from_values(
            "PreG N32 K8 L8 - SC@14 (delta_prefix 0.5)", "accuracy_gain", out["gain"], True
        ),
        ResultRow.from_values(
            "PreG N32 K8 L8 - SC@14 (delta_prefix 0)", "accuracy_gain", out["gain_null"], True
        ),
    ]
    for b in range(10):
        vals = [v[b] for v in out["gain_by_bin"] if not np.isnan(v[b])]
        if vals:
            rows.append(
                ResultRow.from_values(
                    f"gain | p in [{bins[b]:.1f}, {bins[b + 1]:.1f})", "accuracy_gain", vals, True
                )
            )
    peak = float((bins[:-1] + 0.05)[int(np.nanargmax(gbb))])
    claims = [
        Claim(
            "simulator: gain over equal-budget SC peaks for p in [0.3, 0.6]",
            bool(0.3 <= peak <= 0.6),
            f"peak bin centre {peak:.2f}; gains by bin " + ", ".join(f"{x:+.3f}" for x in gbb),
        ),
        Claim(
            "simulator: with delta_prefix = 0 PreG is no better than SC (gain <= 0.01)",
            bool(float(np.mean(out["gain_null"])) <= 0.01),
            f"gain {np.mean(out['gain_null']):+.3f}",
        ),
    ]
    cfg = {
        "questions": nq,
        "pool": 64,
        "resamples": reps,
        "delta_full": 1.0,
        "n_wrong": 4,
        "difficulty": "Beta(2,2)",
        "preg": "N=32, K=8, L=8 of 32 tokens, uniform vote",
        "sc": "M = 14 (equal budget, l = 0.25)",
        "quick": quick,
    }
    return cfg, rows, claims, {}


ARGS_OUT = "bench/results"


def main() -> int:
    global ARGS_OUT
    global TRAIN_STEPS
    parser = bench_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--train-steps",
        type=int,
        default=None,
        help="supplementary run: train the toy model this long (spec: 800); "
        "writes arith_toy_steps<N> and skips the simulator",
    )
    args = parser.parse_args()
    TRAIN_STEPS = args.train_steps
    set_threads(args.threads)
    import torch

    import methodkit

    torch.set_num_threads(args.threads)
    methodkit.seed_everything(args.seeds[0])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ARGS_OUT = str(out)
    records = []
    benches = [
        ("simulator", bench_sim, {"accuracy_gain": "accuracy"}),
        ("arith_toy", bench_toy, {"accuracy": "fraction"}),
    ]
    if args.train_steps is not None:  # supplementary: never overwrite the spec records
        benches = [(f"arith_toy_steps{args.train_steps}", bench_toy, {"accuracy": "fraction"})]
    for name, fn, units in benches:
        start = time.perf_counter()
        config, results, claims, curves = fn(list(args.seeds), args.quick)
        rec = BenchRecord(
            package=PKG,
            benchmark=name,
            config=config,
            seeds=list(args.seeds),
            results=results,
            claim=claims[0],
            claims=claims,
            wall_time_s=time.perf_counter() - start,
            environment=environment(args.threads),
        )
        save_record(rec, out)
        data = rec.to_dict()
        if curves:
            plot_toy_curves(curves, out / f"{name}.png")
        else:
            plot_results(data, out / f"{name}.png", units=units)
        records.append(data)
        _log(f"[{name}] done in {time.perf_counter() - start:.0f}s")
    return finish(records, args.quick)


if __name__ == "__main__":
    sys.exit(main())
