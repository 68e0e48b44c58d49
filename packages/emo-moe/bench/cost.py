"""The cost suite (issue 51): EMO's pooled router beside standard top-k at equal active experts.

Both tiny MoE LMs have the main benchmark's full-run shape (32 routed experts + 1 shared,
top-3 routed, d_model 64, 2 layers, context 128); they differ only in the router. Training
throughput (forward, backward, AdamW step on 16 x 128 tokens) is measured side by side and
interleaved; EMO's document pools act in training only, so inference is plain top-k for both.
The 25 % expert subset (8 of 32 per layer, chosen with ``router_prob`` on calibration rows and
pruned with ``prune_experts``) is timed beside the full model at inference. Peak memory of a
training run of each router comes from ``methodkit.bench.peak_memory`` (a spawned process).
Costs do not depend on the weights: the models are freshly initialised (accuracy lives in the
``modularity`` record).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tasks
import torch

from emo_moe import TinyMoELM, expert_importance, prune_experts, select_expert_subset
from methodkit.bench import (
    Outcome,
    ResultRow,
    check,
    cost_entry,
    interleaved,
    peak_memory,
    stable_ratio,
)

MIB = 2**20


def _rows(cfg: dict[str, Any], n_rows: int) -> torch.Tensor:
    """Packed rows of the offline corpus (documents end with EOS: EMO forms its pools)."""
    data = tasks.corpus_splits(cfg)
    docs = [doc for d in tasks.DOMAINS for doc in data["parts"][d][0]]
    rows = tasks.pack_documents(docs, cfg["model"]["max_len"])
    return rows[:n_rows]


def _model(cfg: dict[str, Any], router: str, seed: int = 0) -> TinyMoELM:
    torch.manual_seed(seed)
    return TinyMoELM(tasks.model_config(cfg, router))


def _trainer(model: TinyMoELM, rows: torch.Tensor, batch: int, steps: int) -> Any:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    state = {"s": 0}

    def run() -> None:
        for _ in range(steps):
            s = state["s"] = (state["s"] + 1) % max(1, rows.shape[0] // batch)
            x = rows[s * batch : (s + 1) * batch]
            loss = model(x, labels=x)["loss"]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

    return run


def train_steps(cfg: dict[str, Any], router: str, batch: int, steps: int) -> None:
    """A spawned child for peak_memory: build the model and run ``steps`` training steps."""
    torch.set_num_threads(1)
    rows = _rows(cfg, batch * (steps + 1))
    _trainer(_model(cfg, router), rows, batch, steps)()


def _inference(model: TinyMoELM, rows: torch.Tensor) -> Any:
    model.eval()

    def run() -> None:
        with torch.no_grad():
            model(rows)

    return run


def cost(args: Any, base: dict[str, Any]) -> Outcome:
    """Tokens/s and memory of EMO vs standard top-k; the 25 % subset's inference speed.

    ``base`` is the modularity benchmark's configuration (its model shape is used).
    """
    quick = args.quick
    cfg = {**base, "bytes_per_domain": 40_000 if quick else 150_000, "split": [0.8, 0.1, 0.1]}
    batch, steps, reps = (4, 1, 2) if quick else (16, 3, 7)
    rows = _rows(cfg, batch * 8)
    seq = rows.shape[1]
    models = {r: _model(cfg, r) for r in ("emo", "topk")}
    train = {r: _trainer(m, rows, batch, steps) for r, m in models.items()}
    secs = interleaved(train, reps)
    tok_train = {r: [batch * seq * steps / s for s in v] for r, v in secs.items()}

    # inference: the full (standard top-k) model vs its 25 % expert subset, pruned
    full = _model(cfg, "topk")
    full.eval()
    m = round(0.25 * full.cfg.num_experts)
    subsets = select_expert_subset(expert_importance(full, list(rows[:4])), m=m,
                                   top_k=full.cfg.top_k)  # fmt: skip
    pruned = prune_experts(full, subsets)
    infer_rows = rows[: 2 * batch]
    inf = interleaved({"all experts": _inference(full, infer_rows),
                       "25 % subset": _inference(pruned, infer_rows)}, reps)  # fmt: skip
    tok_inf = {k: [infer_rows.numel() / s for s in v] for k, v in inf.items()}

    mem = {
        r: peak_memory(train_steps, args=(cfg, r, batch, 2), in_process=quick) / MIB
        for r in ("emo", "topk")
    }
    n_routed = {k: sum(p.numel() for lay in mod.moe_layers() for p in lay.experts.parameters())
                for k, mod in (("all experts", full), ("25 % subset", pruned))}  # fmt: skip
    stat = f"median of {reps} interleaved reps ({steps} steps of {batch}x{seq} tokens each)"
    cost_list = [
        cost_entry("training throughput at equal active experts (3 routed + 1 shared of 32)",
              "tokens/s", False, "EMO (pooled router)", tok_train["emo"],
              "standard top-k MoE", tok_train["topk"], stat),
        cost_entry("peak memory of a training run (RSS above import torch)", "MiB", True,
              "EMO (pooled router)", [mem["emo"]], "standard top-k MoE", [mem["topk"]],
              "one spawned run each (2 steps)" if not quick else "in-process lower bound"),
        cost_entry("inference throughput", "tokens/s", False, "25 % expert subset (pruned)",
              tok_inf["25 % subset"], "all 32 experts", tok_inf["all experts"],
              f"median of {reps} interleaved reps ({infer_rows.numel()} tokens each)"),
    ]  # fmt: skip
    claims = [
        check(
            f"the pruned 25 % subset keeps exactly {m} of {full.cfg.num_experts} routed experts "
            "per layer (routed-expert parameters x 0.25)",
            n_routed["25 % subset"] * 4 == n_routed["all experts"]
            and all(len(s) == m for s in subsets),
            f"{n_routed['25 % subset']} of {n_routed['all experts']} routed-expert parameters",
            inputs=list(n_routed.values()),
            quick=True,
        ),
        stable_ratio(cost_list[0]),
        stable_ratio(cost_list[2]),
    ]
    rows_out = [
        ResultRow.from_values(
            f"{'EMO' if r == 'emo' else 'standard top-k'} training", "tokens_per_s", v, True
        )
        for r, v in tok_train.items()
    ]
    rows_out += [
        ResultRow.from_values(f"{k} inference", "tokens_per_s", v, True) for k, v in tok_inf.items()
    ]
    rows_out += [ResultRow.from_values(f"{'EMO' if r == 'emo' else 'standard top-k'} training",
                                       "peak_MiB", [v], False) for r, v in mem.items()]  # fmt: skip
    config = {
        "model": dataclasses.asdict(full.cfg) | {"router": "emo vs topk"},
        "batch": batch, "seq_len": seq, "steps_per_rep": steps, "reps": reps,
        "subset": f"{m} of {full.cfg.num_experts} routed experts per layer (router_prob on 4 "
        "rows, prune_experts)",
        "weights": "fresh initialisation (cost does not depend on the weights)",
        "timing": "interleaved, order rotating each rep, one warm-up each",
        "cost": cost_list,
    }  # fmt: skip
    return Outcome(config, rows_out, claims, seeds=[0], plot_metrics=["tokens_per_s", "peak_MiB"],
                   labels={"tokens_per_s": "throughput", "peak_MiB": "peak training memory"},
                   units={"tokens_per_s": "tokens/s", "peak_MiB": "MiB"})  # fmt: skip
