"""Arithmetic word-problem RL benchmark: SFT, then ES / ESSAM / accelerated ESSAM / MinimalGRPO
at equal rollouts, plus peak training-step memory (ESSAM vs GRPO vs pure inference).

Usage (from packages/essam):  python bench/run.py [--quick] [--seeds 0 1 2] [--threads 1]
"""

from __future__ import annotations

import copy
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from essam import ESSAM
from essam.baselines import MinimalGRPO
from essam.rollout import generate
from essam.tasks import arithmetic as ar
from methodkit import seed_everything, zo
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

# Compact phrasing of the same problems (numbers, operations, splits and targets unchanged):
# the shared 2-core machine was ~5x oversubscribed, and full word-problem prompts are ~4x longer.
COMPACT = {"start": "{a}", "+": "+{b}", "-": "-{b}", "*": "*{b}", "q": "="}
COMPACT_OOD = {"start": "x={a}", "+": " plus {b}", "-": " minus {b}", "*": " times {b}", "q": "?"}

FULL = {
    "model": {"n_layer": 2, "n_embd": 96, "n_head": 4},
    "sft_steps": 600,
    "sft_batch": 64,
    "sft_lr": 3e-3,
    "n_eval": 200,
    "population": 8,
    "prompts_per_iter": 16,
    "rollout_budget": 3072,
    "lr_over_sigma": 0.5,  # alpha / sigma of the ES-at-scale defaults (5e-4 / 1e-3)
    "rho": "auto",  # 0.05 * sigma * sqrt(d)
    "sigmas": [1e-3, 3e-3, 1e-2],
    "grpo": {"G": 8, "prompts": 4, "lr": 1e-4, "beta": 0.04},
    "max_new_tokens": 40,
    "memory_model": {"n_layer": 8, "n_embd": 512, "n_head": 8},
    "memory_batch": 16,
}
QUICK = {
    **FULL,
    "model": {"n_layer": 1, "n_embd": 32, "n_head": 2},
    "sft_steps": 20,
    "sft_batch": 16,
    "n_eval": 16,
    "population": 4,
    "prompts_per_iter": 4,
    "rollout_budget": 64,
    "sigmas": [1e-3, 1e-2],
    "grpo": {"G": 4, "prompts": 2, "lr": 1e-4, "beta": 0.04},
    "max_new_tokens": 16,
    "memory_model": None,
}


def build_model(tok: Any, n_layer: int, n_embd: int, n_head: int, seed: int = 0) -> Any:
    import transformers

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        cfg = transformers.GPT2Config(
            n_layer=n_layer,
            n_embd=n_embd,
            n_head=n_head,
            n_positions=128,
            vocab_size=len(tok),
            eos_token_id=tok.eos_token_id,
            bos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
        return transformers.GPT2LMHeadModel(cfg)


def sft(model: Any, tok: Any, rows: list, steps: int, batch: int, lr: float) -> list[float]:
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    model.train()
    tok.padding_side = "right"
    for step in range(steps):
        chunk = [rows[(step * batch + i) % len(rows)] for i in range(batch)]
        enc = tok([r["prompt"] + r["target"] for r in chunk], return_tensors="pt", padding=True)
        labels = enc["input_ids"].clone()
        labels[enc["attention_mask"] == 0] = -100
        for i, r in enumerate(chunk):
            labels[i, : len(tok(r["prompt"])["input_ids"])] = -100
        loss = model(**enc, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    tok.padding_side = "left"
    model.eval()
    return losses


def accuracy(model: Any, tok: Any, rows: list, max_new: int, bs: int = 100) -> float:
    hits = 0.0
    for i in range(0, len(rows), bs):
        chunk = rows[i : i + bs]
        comp = generate(model, tok, [r["prompt"] for r in chunk], max_new)
        hits += sum(ar.correctness_reward(None, comp, [r["answer"] for r in chunk]))
    return hits / len(rows)


def make_closure(model: Any, tok: Any, rows: list, max_new: int, counter: list) -> Any:
    def closure() -> float:
        comp = generate(model, tok, [r["prompt"] for r in rows], max_new)
        counter[0] += len(rows)
        return float(np.mean(ar.partial_reward(None, comp, [r["answer"] for r in rows])))

    return closure


def calibrate_sigma(model: Any, tok: Any, rows: list, cfg: dict, log: Any) -> float:
    """Largest sigma whose population mean reward stays >= 80 % of the unperturbed reward."""
    params = zo.param_list(model)
    base = make_closure(model, tok, rows, cfg["max_new_tokens"], [0])()
    chosen = min(cfg["sigmas"])
    for sigma in sorted(cfg["sigmas"]):
        vals = []
        for k in range(cfg["population"]):
            with zo.perturbed(params, zo.derive_seed(12345, k), sigma):
                vals.append(make_closure(model, tok, rows, cfg["max_new_tokens"], [0])())
        log(f"  sigma={sigma:g}: population mean reward {np.mean(vals):.3f} (base {base:.3f})")
        if np.mean(vals) >= 0.8 * base:
            chosen = sigma
    return chosen


def run_zo(
    model: Any, tok: Any, train: list, variant: str, sigma: float, seed: int, cfg: dict
) -> dict:
    n, b = cfg["population"], cfg["prompts_per_iter"]
    opt = ESSAM(
        model.parameters(),
        sigma=sigma,
        lr=cfg["lr_over_sigma"] * sigma,
        rho=cfg["rho"] if variant != "es" else 0.0,
        population_size=n,
        variant=variant,
        seed=seed,
    )
    rng = np.random.default_rng(seed)
    counter = [0]
    curve = []
    t0 = time.perf_counter()
    it = 0
    while counter[0] < cfg["rollout_budget"]:
        rows = [train[i] for i in rng.choice(len(train), b, replace=False)]
        info = opt.step(make_closure(model, tok, rows, cfg["max_new_tokens"], counter))
        curve.append((counter[0], info.mean_reward))
        it += 1
    return {
        "rollouts": counter[0],
        "seconds": time.perf_counter() - t0,
        "iters": it,
        "curve": curve,
    }


def run_grpo(model: Any, tok: Any, train: list, seed: int, cfg: dict) -> dict:
    g = cfg["grpo"]
    trainer = MinimalGRPO(
        model,
        tok,
        ar.partial_reward,
        num_generations=g["G"],
        learning_rate=g["lr"],
        beta=g["beta"],
        max_completion_length=cfg["max_new_tokens"],
        seed=seed,
    )
    rng = np.random.default_rng(seed)
    curve = []
    t0 = time.perf_counter()
    it = 0
    while trainer.rollouts < cfg["rollout_budget"]:
        rows = [train[i] for i in rng.choice(len(train), g["prompts"], replace=False)]
        out = trainer.step(rows)
        curve.append((trainer.rollouts, out["reward"]))
        it += 1
    model.eval()
    return {
        "rollouts": trainer.rollouts,
        "seconds": time.perf_counter() - t0,
        "iters": it,
        "curve": curve,
    }


# ---------------------------------------------------------------- memory (spawned children)
def _mem_setup(mcfg: dict, batch: int) -> tuple:
    import torch as _t

    _t.set_num_threads(1)
    tok = ar.CharTokenizer()
    model = build_model(tok, **mcfg)
    model.eval()
    rows = ar.make_problems(batch, "rl_train", 0, templates=COMPACT)
    return tok, model, rows


def mem_setup_only(mcfg: dict, batch: int, max_new: int) -> None:
    _mem_setup(mcfg, batch)  # import transformers + build the model: the constant part


def mem_inference(mcfg: dict, batch: int, max_new: int) -> None:
    tok, model, rows = _mem_setup(mcfg, batch)
    generate(model, tok, [r["prompt"] for r in rows], max_new)


def mem_essam(mcfg: dict, batch: int, max_new: int) -> None:
    tok, model, rows = _mem_setup(mcfg, batch)
    opt = ESSAM(model.parameters(), sigma=1e-3, lr=1e-3, rho=1e-3, population_size=2)
    opt.step(make_closure(model, tok, rows, max_new, [0]))


def mem_grpo(mcfg: dict, batch: int, max_new: int) -> None:
    tok, model, rows = _mem_setup(mcfg, batch)
    g = 8
    grpo = MinimalGRPO(
        model, tok, ar.partial_reward, num_generations=g, beta=0.04, max_completion_length=max_new
    )
    grpo.step(rows[: max(1, batch // g)])


def measure_memory(cfg: dict, log: Any) -> dict:
    mcfg, batch, max_new = cfg["memory_model"], cfg["memory_batch"], cfg["max_new_tokens"]
    out = {}
    jobs = (
        ("setup only", mem_setup_only),
        ("inference", mem_inference),
        ("ESSAM", mem_essam),
        ("GRPO", mem_grpo),
    )
    for name, fn in jobs:
        out[name] = zo.peak_memory(fn, "cpu", args=(mcfg, batch, max_new)) / 2**20
        log(f"  peak {name}: {out[name]:.1f} MiB")
    return out


def memory_record(cfg: dict, env: dict, log: Any) -> BenchRecord:
    """Peak memory of one training step (claim 4) as a record; also saved to --out."""
    mx = cfg["max_new_tokens"]
    t1 = time.perf_counter()
    log("peak memory of one training step (spawned processes, RSS above import torch):")
    mem = measure_memory(cfg, log)
    setup = mem["setup only"]
    m_claim = Claim(
        "(4) peak training-step memory: ESSAM <= 1/4 of MinimalGRPO (beta > 0) and "
        "<= 1.3x pure inference on the same batch",
        mem["ESSAM"] <= mem["GRPO"] / 4 and mem["ESSAM"] <= 1.3 * mem["inference"],
        f"ESSAM {mem['ESSAM']:.1f} MiB, GRPO {mem['GRPO']:.1f} MiB "
        f"(ratio {mem['GRPO'] / max(mem['ESSAM'], 1e-9):.1f}x), inference "
        f"{mem['inference']:.1f} MiB (ESSAM/inference {mem['ESSAM'] / mem['inference']:.2f}); "
        f"not thresholded: above the {setup:.1f} MiB of importing transformers and building "
        f"the model, ESSAM +{mem['ESSAM'] - setup:.1f}, GRPO +{mem['GRPO'] - setup:.1f}, "
        f"inference +{mem['inference'] - setup:.1f} MiB",
    )
    results = [ResultRow.from_values(k, "peak_MiB", [v], False) for k, v in mem.items()]
    results += [
        ResultRow.from_values(k, "peak_MiB_above_setup", [v - setup], False)
        for k, v in mem.items()
        if k != "setup only"
    ]
    mrec = BenchRecord(
        package="essam",
        benchmark="peak_memory",
        config={
            "model": cfg["memory_model"],
            "batch": cfg["memory_batch"],
            "max_new_tokens": mx,
            "essam_population_size": 2,
            "grpo_G": 8,
            "grpo_beta": 0.04,
            "method": "methodkit.zo.peak_memory (CPU RSS of a spawned process)",
        },
        seeds=[0],
        results=results,
        claim=m_claim,
        claims=[m_claim],
        wall_time_s=time.perf_counter() - t1,
        environment=env,
    )
    save_record(mrec, cfg["out_dir"])
    plot_results(
        mrec.to_dict(), Path(cfg["out_dir"]) / "peak_memory.png", units={"peak_MiB": "MiB"}
    )
    return mrec


# --------------------------------------------------------------------------------- main
def main() -> int:
    parser = bench_parser(__doc__)
    parser.add_argument(
        "--only-memory", action="store_true", help="rerun only the peak-memory benchmark"
    )
    args = parser.parse_args()
    set_threads(args.threads)
    cfg = dict(QUICK if args.quick else FULL)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    cfg["out_dir"] = str(out_dir)

    def log(msg: str) -> None:
        print(msg, flush=True)

    if args.only_memory:
        import transformers  # noqa: F401  (recorded in the environment)

        return finish([memory_record(cfg, environment(args.threads), log).to_dict()], args.quick)
    t_start = time.perf_counter()
    seed_everything(0)
    tok = ar.CharTokenizer()
    sft_rows = ar.make_problems(20000 if not args.quick else 400, "sft", 0, templates=COMPACT)
    train = ar.make_problems(2000 if not args.quick else 100, "rl_train", 1, templates=COMPACT)
    test = ar.make_problems(cfg["n_eval"], "rl_test", 2, templates=COMPACT)
    ood = ar.make_problems(cfg["n_eval"], "ood", 3, templates=COMPACT_OOD)
    base = build_model(tok, **cfg["model"])
    n_params = sum(p.numel() for p in base.parameters())
    t0 = time.perf_counter()
    losses = sft(base, tok, sft_rows, cfg["sft_steps"], cfg["sft_batch"], cfg["sft_lr"])
    sft_s = time.perf_counter() - t0
    mx = cfg["max_new_tokens"]
    acc_sft = (accuracy(base, tok, test, mx), accuracy(base, tok, ood, mx))
    log(
        f"SFT: {n_params} params, {cfg['sft_steps']} steps in {sft_s:.0f}s, final loss "
        f"{losses[-1]:.3f}, acc rl_test {acc_sft[0]:.3f} ood {acc_sft[1]:.3f}"
    )
    sigma = calibrate_sigma(base, tok, train[: cfg["prompts_per_iter"]], cfg, log)
    log(f"sigma = {sigma:g}")
    state = copy.deepcopy(base.state_dict())

    methods = ["ES", "ESSAM", "ESSAM-acc", "GRPO"]
    res: dict[str, dict[str, list[float]]] = {
        m: {"acc_rl_test": [], "acc_ood": [], "rollouts": [], "seconds": [], "s_per_iter": []}
        for m in methods
    }
    curves: dict[str, list] = {m: [] for m in methods}
    for seed in args.seeds:
        for m in methods:
            model = build_model(tok, **cfg["model"])
            model.load_state_dict(state)
            model.eval()
            if m == "GRPO":
                r = run_grpo(model, tok, train, seed, cfg)
            else:
                variant = {"ES": "es", "ESSAM": "standard", "ESSAM-acc": "accelerated"}[m]
                r = run_zo(model, tok, train, variant, sigma, seed, cfg)
            a_test, a_ood = accuracy(model, tok, test, mx), accuracy(model, tok, ood, mx)
            res[m]["acc_rl_test"].append(a_test)
            res[m]["acc_ood"].append(a_ood)
            res[m]["rollouts"].append(r["rollouts"])
            res[m]["seconds"].append(r["seconds"])
            res[m]["s_per_iter"].append(r["seconds"] / r["iters"])
            curves[m].append(r["curve"])
            log(
                f"seed {seed} {m:9s} acc rl_test {a_test:.3f} ood {a_ood:.3f} "
                f"rollouts {r['rollouts']} {r['seconds']:.0f}s ({r['iters']} iters)"
            )

    rows = [
        ResultRow.from_values("SFT", "acc_rl_test", [acc_sft[0]], True),
        ResultRow.from_values("SFT", "acc_ood", [acc_sft[1]], True),
    ]
    for m in methods:
        for metric, vals in res[m].items():
            rows.append(ResultRow.from_values(m, metric, vals, metric.startswith("acc")))
    mean = {m: {k: float(np.mean(v)) for k, v in res[m].items()} for m in methods}
    claims = [
        Claim(
            "(1) ESSAM improves rl_test accuracy over the SFT checkpoint by >= 3 points",
            mean["ESSAM"]["acc_rl_test"] - acc_sft[0] >= 0.03,
            f"ESSAM {100 * mean['ESSAM']['acc_rl_test']:.1f}% vs SFT {100 * acc_sft[0]:.1f}%",
        ),
        Claim(
            "(2a) ESSAM accuracy >= ES accuracy - 1 point at equal rollouts",
            mean["ESSAM"]["acc_rl_test"] >= mean["ES"]["acc_rl_test"] - 0.01,
            f"ESSAM {100 * mean['ESSAM']['acc_rl_test']:.1f}% vs ES "
            f"{100 * mean['ES']['acc_rl_test']:.1f}%",
        ),
        Claim(
            "(2b) accelerated ESSAM wall-clock per iteration <= 0.6x standard ESSAM's",
            mean["ESSAM-acc"]["s_per_iter"] <= 0.6 * mean["ESSAM"]["s_per_iter"],
            f"{mean['ESSAM-acc']['s_per_iter']:.2f}s vs {mean['ESSAM']['s_per_iter']:.2f}s "
            f"(ratio {mean['ESSAM-acc']['s_per_iter'] / mean['ESSAM']['s_per_iter']:.2f})",
        ),
        Claim(
            "(3) ESSAM accuracy >= GRPO accuracy - 15 points",
            mean["ESSAM"]["acc_rl_test"] >= mean["GRPO"]["acc_rl_test"] - 0.15,
            f"ESSAM {100 * mean['ESSAM']['acc_rl_test']:.1f}% vs GRPO "
            f"{100 * mean['GRPO']['acc_rl_test']:.1f}%",
        ),
    ]
    config = {k: v for k, v in cfg.items() if k != "out_dir"}
    config.update(
        {
            "n_params": n_params,
            "sigma_chosen": sigma,
            "sft_seconds": sft_s,
            "sft_final_loss": losses[-1],
            "phrasing": "compact (see README)",
            "train_reward": "partial credit",
            "accuracy": "exact match, greedy",
        }
    )
    env = environment(args.threads)
    records = []
    rec = BenchRecord(
        package="essam",
        benchmark="arith_rl",
        config=config,
        seeds=list(args.seeds),
        results=rows,
        claim=claims[0],
        claims=claims,
        wall_time_s=time.perf_counter() - t_start,
        environment=env,
    )
    save_record(rec, out_dir)
    plot_results(rec.to_dict(), out_dir / "arith_rl.png", metrics=["acc_rl_test", "acc_ood"])
    _plot_curves(curves, out_dir / "arith_rl_curves.png")
    records.append(rec.to_dict())

    if cfg["memory_model"] is not None:
        records.append(memory_record(cfg, env, log).to_dict())
    return finish(records, args.quick)


def _plot_curves(curves: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3))
    for m, runs in curves.items():
        for k, run in enumerate(runs):
            if run:
                x, y = zip(*run, strict=True)
                ax.plot(
                    x, y, color=f"C{list(curves).index(m)}", alpha=0.7, label=m if k == 0 else None
                )
    ax.set_xlabel("rollouts (completions generated)")
    ax.set_ylabel("mean train reward (partial credit)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
