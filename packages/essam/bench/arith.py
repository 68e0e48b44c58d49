"""The arithmetic RL protocol: the model, SFT, accuracy, sigma calibration and the training runs."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from essam import ESSAM
from essam.baselines import MinimalGRPO
from essam.rollout import generate
from essam.tasks import arithmetic as ar
from methodkit import zo

# Compact phrasing of the same problems (numbers, operations, splits and targets unchanged):
# the shared 2-core machine was ~5x oversubscribed, and full word-problem prompts are ~4x longer.
COMPACT = {"start": "{a}", "+": "+{b}", "-": "-{b}", "*": "*{b}", "q": "="}
COMPACT_OOD = {"start": "x={a}", "+": " plus {b}", "-": " minus {b}", "*": " times {b}", "q": "?"}


def log(msg: str) -> None:
    print(msg, flush=True)


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


def sft(
    model: Any,
    tok: Any,
    rows: list,
    steps: int,
    batch: int,
    lr: float,
    opt: Any = None,
    start: int = 0,
) -> tuple[list[float], Any]:
    """``steps`` AdamW steps on prompt+target (loss on the target only); resumable via ``opt``."""
    opt = opt or torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    model.train()
    tok.padding_side = "right"
    for step in range(start, start + steps):
        chunk = [rows[(step * batch + i) % len(rows)] for i in range(batch)]
        enc = tok([r["prompt"] + r["target"] for r in chunk], return_tensors="pt", padding=True)
        labels = enc["input_ids"].clone()
        labels[enc["attention_mask"] == 0] = -100
        for i, r in enumerate(chunk):
            labels[i, : len(r["prompt"])] = -100  # CharTokenizer: one token per character
        loss = model(**enc, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    tok.padding_side = "left"
    model.eval()
    return losses, opt


def sft_to_band(model: Any, tok: Any, rows: list, test: list, cfg: dict) -> dict:
    """SFT in chunks until greedy ``rl_test`` accuracy reaches the spec's 20 % floor.

    The spec fixes the SFT budget so that the start lies in 20-60 %; this picks it: after each
    chunk of ``sft_chunk`` steps the accuracy on ``test`` is measured, and SFT stops at the
    first chunk at or above ``band[0]`` or at ``sft_max_steps`` / ``sft_max_seconds``.
    """
    opt, steps, losses, trace = None, 0, [], []
    t0 = time.perf_counter()
    while steps < cfg["sft_max_steps"] and time.perf_counter() - t0 < cfg["sft_max_seconds"]:
        new, opt = sft(
            model, tok, rows, cfg["sft_chunk"], cfg["sft_batch"], cfg["sft_lr"], opt, steps
        )
        steps += cfg["sft_chunk"]
        losses += new
        acc = accuracy(model, tok, test, cfg["max_new_tokens"])
        trace.append((steps, acc))
        log(f"  SFT {steps} steps: loss {new[-1]:.3f}, acc rl_test {acc:.3f}")
        if acc >= cfg["band"][0]:
            break
    return {"steps": steps, "losses": losses, "trace": trace, "seconds": time.perf_counter() - t0}


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


def calibrate_sigma(model: Any, tok: Any, rows: list, cfg: dict) -> float:
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


def curves_plot(curves: dict) -> Callable[[dict, Path], None]:
    """An extra plot for run_suite: every run's mean train reward against rollouts."""

    def plot(record: dict, path: Path) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3))
        for m, runs in curves.items():
            for k, run in enumerate(runs):
                if run:
                    x, y = zip(*run, strict=True)
                    color = f"C{list(curves).index(m)}"
                    ax.plot(x, y, color=color, alpha=0.7, label=m if k == 0 else None)
        ax.set_xlabel("rollouts (completions generated)")
        ax.set_ylabel("mean train reward (partial credit)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=150)
        plt.close(fig)

    return plot
