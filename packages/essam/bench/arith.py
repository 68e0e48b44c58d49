"""The arithmetic RL protocol: the model, SFT, accuracy, sigma calibration and the training runs."""

from __future__ import annotations

import copy
import re
import time
import zlib
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


def mix_formats(rows: list, fmt: dict | None) -> list:
    """The SFT data of the calibration world: some targets end in another answer format.

    A row whose last worked step is an ``fmt["last_op"]`` operation gets ``fmt["alt"]`` in
    place of ``" #### "`` with probability ``fmt["q"]`` (a hash of the prompt decides). The
    reward reads only ``#### <n>``, so after SFT the greedy model answers those problems in a
    format that scores 0 while sampling still produces ``####`` sometimes: a task at the
    model's edge that RL can fix without new arithmetic.
    """
    if not fmt:
        return rows
    out = []
    for r in rows:
        last = r["target"].split(" #### ")[0].split(" ")[-1]
        if fmt["last_op"] in last and zlib.crc32(r["prompt"].encode()) % 1000 < 1000 * fmt["q"]:
            r = {**r, "target": r["target"].replace(" #### ", fmt["alt"])}
        out.append(r)
    return out


def raw_accuracy(model: Any, tok: Any, rows: list, max_new: int, alt: str) -> float:
    """Greedy accuracy that also accepts the alternative format: the arithmetic alone."""
    pattern = re.compile(r"(?:####|" + re.escape(alt.strip()) + r")\s*(-?\d+)")
    comp = generate(model, tok, [r["prompt"] for r in rows], max_new)
    hits = 0
    for c, r in zip(comp, rows, strict=True):
        m = pattern.search(c)
        hits += int(m is not None and int(m.group(1)) == int(r["answer"]))
    return hits / len(rows)


_SFT: dict[str, tuple[dict, dict]] = {}
SFT_KEYS = (
    "model",
    "sft_chunk",
    "sft_max_steps",
    "sft_max_seconds",
    "band",
    "sft_batch",
    "sft_lr",
    "n_eval",
    "max_new_tokens",
    "format_mix",
)


def world(cfg: dict, quick: bool) -> tuple[Any, dict]:
    """The character tokenizer and the splits (SFT rows with the format mix)."""
    tok = ar.CharTokenizer()
    sft_rows = ar.make_problems(400 if quick else 20000, "sft", 0, templates=COMPACT)
    data = {
        "sft": mix_formats(sft_rows, cfg["format_mix"]),
        "train": ar.make_problems(100 if quick else 2000, "rl_train", 1, templates=COMPACT),
        "test": ar.make_problems(cfg["n_eval"], "rl_test", 2, templates=COMPACT),
        "ood": ar.make_problems(cfg["n_eval"], "ood", 3, templates=COMPACT_OOD),
    }
    return tok, data


def sft_checkpoint(cfg: dict, tok: Any, data: dict) -> tuple[dict, dict]:
    """SFT to the band once per configuration in this process (the suites share it)."""
    key = repr([(k, cfg[k]) for k in SFT_KEYS])
    if key not in _SFT:
        base = build_model(tok, **cfg["model"])
        fit = sft_to_band(base, tok, data["sft"], data["test"], cfg)
        mx = cfg["max_new_tokens"]
        fit["acc_rl_test"] = fit["trace"][-1][1]
        fit["acc_ood"] = accuracy(base, tok, data["ood"], mx)
        alt = (cfg["format_mix"] or {}).get("alt", " #### ")
        fit["raw_rl_test"] = raw_accuracy(base, tok, data["test"], mx, alt)
        fit["n_params"] = sum(p.numel() for p in base.parameters())
        log(
            f"SFT: {fit['n_params']} params, {fit['steps']} steps in {fit['seconds']:.0f}s, "
            f"acc rl_test {fit['acc_rl_test']:.3f} (either format {fit['raw_rl_test']:.3f}) "
            f"ood {fit['acc_ood']:.3f}"
        )
        _SFT[key] = (copy.deepcopy(base.state_dict()), fit)
    return _SFT[key]


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


class Checkpoints:
    """Held-out accuracy every ``budget / n`` rollouts; evaluation time is kept off the clock."""

    def __init__(self, model: Any, tok: Any, test: list, cfg: dict, start_acc: float) -> None:
        self.model, self.tok, self.test, self.mx = model, tok, test, cfg["max_new_tokens"]
        self.every = cfg["rollout_budget"] / cfg["checkpoints"]
        self.points: list[tuple[int, float, float]] = [(0, 0.0, start_acc)]
        self.t0 = time.perf_counter()
        self.paused = 0.0

    def seconds(self) -> float:
        return time.perf_counter() - self.t0 - self.paused

    def after(self, rollouts: int, final: bool = False) -> None:
        if rollouts >= self.every * len(self.points) or (final and rollouts > self.points[-1][0]):
            t, t_eval = self.seconds(), time.perf_counter()
            self.points.append((rollouts, t, accuracy(self.model, self.tok, self.test, self.mx)))
            self.paused += time.perf_counter() - t_eval


def run_zo(
    model: Any, tok: Any, data: dict, variant: str, sigma: float, seed: int, cfg: dict
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
    train = data["train"]
    rng = np.random.default_rng(seed)
    counter = [0]
    curve = []
    ck = Checkpoints(model, tok, data["test"], cfg, data["start_acc"])
    it = 0
    while counter[0] < cfg["rollout_budget"]:
        rows = [train[i] for i in rng.choice(len(train), b, replace=False)]
        info = opt.step(make_closure(model, tok, rows, cfg["max_new_tokens"], counter))
        curve.append((counter[0], info.mean_reward))
        it += 1
        ck.after(counter[0])
    ck.after(counter[0], final=True)
    return {
        "rollouts": counter[0],
        "seconds": ck.seconds(),
        "iters": it,
        "curve": curve,
        "checkpoints": ck.points,
    }


def run_grpo(model: Any, tok: Any, data: dict, seed: int, cfg: dict) -> dict:
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
    train = data["train"]
    rng = np.random.default_rng(seed)
    curve = []
    ck = Checkpoints(model, tok, data["test"], cfg, data["start_acc"])
    it = 0
    while trainer.rollouts < cfg["rollout_budget"]:
        rows = [train[i] for i in rng.choice(len(train), g["prompts"], replace=False)]
        out = trainer.step(rows)
        curve.append((trainer.rollouts, out["reward"]))
        it += 1
        ck.after(trainer.rollouts)
    ck.after(trainer.rollouts, final=True)
    model.eval()
    return {
        "rollouts": trainer.rollouts,
        "seconds": ck.seconds(),
        "iters": it,
        "curve": curve,
        "checkpoints": ck.points,
    }


def curves_plot(runs: dict[str, list[dict]]) -> Callable[[dict, Path], None]:
    """Learning curves: held-out greedy accuracy against rollouts and against training time."""

    def plot(record: dict, path: Path) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
        for j, (m, seeds) in enumerate(runs.items()):
            for k, r in enumerate(seeds):
                x, t, acc = zip(*r["checkpoints"], strict=True)
                pct = [100 * a for a in acc]
                label = m if k == 0 else None
                axes[0].plot(x, pct, color=f"C{j}", alpha=0.75, marker=".", label=label)
                axes[1].plot(t, pct, color=f"C{j}", alpha=0.75, marker=".")
        axes[0].set_xlabel("rollouts (completions generated)")
        axes[1].set_xlabel("training time, seconds (evaluation excluded)")
        axes[0].set_ylabel("held-out rl_test accuracy, % (higher is better)")
        axes[0].legend(fontsize=8)
        for ax in axes:
            ax.grid(alpha=0.3)
        fig.suptitle("one line per seed", fontsize=9)
        fig.tight_layout()
        fig.savefig(path, dpi=150)
        plt.close(fig)

    return plot
