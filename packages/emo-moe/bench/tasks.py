"""Helpers of the EMO modularity benchmark: corpus, training, evaluation, summary."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import torch

from emo_moe import (
    DOMAINS,
    TinyMoEConfig,
    TinyMoELM,
    build_offline_corpus,
    domain_losses,
    expert_importance,
    expert_usage_matrix,
    modularity_nmi,
    pack_documents,
    restrict_experts,
    select_expert_subset,
    split_documents,
)
from emo_moe.baselines import random_expert_subsets, standard_moe
from emo_moe.corpus import ByteTokenizer
from methodkit.bench import Claim, check, compare

MODELS = ("standard", "emo")
_CORPUS: dict[tuple[int, int], Any] = {}


def corpus_splits(cfg: dict[str, Any]) -> dict[str, Any]:
    """The offline corpus split 90/5/5 per domain (built once per size and kept)."""
    key = (0, cfg["bytes_per_domain"])
    if key not in _CORPUS:
        t0 = time.perf_counter()
        c = build_offline_corpus(0, cfg["bytes_per_domain"])
        parts = {d: split_documents(c.documents[d], tuple(cfg["split"])) for d in DOMAINS}
        _CORPUS[key] = {"corpus": c, "parts": parts, "build_s": time.perf_counter() - t0}
    return _CORPUS[key]


def model_config(cfg: dict[str, Any], router: str) -> TinyMoEConfig:
    base = TinyMoEConfig(router="emo", **cfg["model"])
    return base if router == "emo" else standard_moe(base)


def train(
    mcfg: TinyMoEConfig, rows: torch.Tensor, cfg: dict[str, Any], seed: int
) -> tuple[TinyMoELM, float]:
    """AdamW with warm-up and cosine decay; the same data order for every model of a seed."""
    torch.manual_seed(seed)
    model = TinyMoELM(mcfg)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], betas=(0.9, 0.95), weight_decay=0.1)
    steps, bs, warm = cfg["steps"], cfg["batch"], max(1, cfg["steps"] // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt,
        lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / steps))),
    )
    order = torch.randperm(rows.shape[0], generator=torch.Generator().manual_seed(seed))
    torch.manual_seed(seed + 1000)  # pool-size draws
    t0 = time.perf_counter()
    model.train()
    for s in range(steps):
        idx = order[(torch.arange(bs) + s * bs) % rows.shape[0]]
        x = rows[idx]
        out = model(x, labels=x)
        opt.zero_grad(set_to_none=True)
        out["loss"].backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    model.eval()
    return model, (time.perf_counter() - t0) / steps


def _calibration(docs: list[str], n: int, max_len: int) -> list[torch.Tensor]:
    tok = ByteTokenizer()
    return [torch.tensor(tok.encode(d)[:max_len]) for d in docs[:n] if d]


def _expert_params(model: TinyMoELM) -> tuple[int, int]:
    lay = model.moe_layers()[0]
    per_expert = sum(p.numel() for p in lay.experts[0].parameters())
    total = sum(p.numel() for p in model.parameters())
    return total, per_expert * len(model.moe_layers())  # params of one expert in every layer


def evaluate(model: TinyMoELM, parts: dict, cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    """Full and restricted per-domain test loss, random-subset control, NMI, memory."""
    mc = model.cfg
    test = {d: parts[d][2] for d in DOMAINS}
    full = domain_losses(model, test, mc.max_len, max_rows=cfg["eval_rows"])
    res: dict[str, Any] = {"full": full}
    gen = torch.Generator().manual_seed(10_000 + seed)
    for frac in cfg["fractions"]:
        m = round(frac * mc.num_experts)
        sel, rnd = {}, {}
        for d in DOMAINS:
            cal = _calibration(parts[d][1], cfg["calib_docs"], mc.max_len)
            subs = select_expert_subset(expert_importance(model, cal), m=m, top_k=mc.top_k)
            with restrict_experts(model, subs):
                sel[d] = domain_losses(model, {d: test[d]}, mc.max_len, cfg["eval_rows"])[d]
            subs = random_expert_subsets(mc.n_layers, mc.num_experts, m, gen)
            with restrict_experts(model, subs):
                rnd[d] = domain_losses(model, {d: test[d]}, mc.max_len, cfg["eval_rows"])[d]
        res[f"selected_{m}"], res[f"random_{m}"] = sel, rnd
    docs = [doc for d in DOMAINS for doc in test[d][: cfg["nmi_docs"]]]
    labels = [d for d in DOMAINS for _ in test[d][: cfg["nmi_docs"]]]
    res["nmi"] = modularity_nmi(
        expert_usage_matrix(model, docs, mc.max_len), labels, k=4, random_state=seed
    )
    res["params"] = _expert_params(model)
    return res


def run_seed(cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    """Train the standard MoE and EMO on the same data order and evaluate both."""
    data = corpus_splits(cfg)
    train_docs = [doc for d in DOMAINS for doc in data["parts"][d][0]]
    perm = np.random.default_rng(seed).permutation(len(train_docs))
    rows = pack_documents([train_docs[i] for i in perm], cfg["model"]["max_len"])
    out: dict[str, Any] = {"train_rows": int(rows.shape[0])}
    for name, router in (("standard", "topk"), ("emo", "emo")):
        model, step_s = train(model_config(cfg, router), rows, cfg, seed)
        out[name] = {**evaluate(model, data["parts"], cfg, seed), "step_s": step_s}
    return out


def _metrics(r: dict[str, Any], sizes: list[int]) -> dict[str, float]:
    full = float(np.mean(list(r["full"].values())))
    m = {"loss_full": full, "nmi": r["nmi"], "train_step_s": r["step_s"]}
    total, experts = r["params"]
    for k in sizes:
        sel = float(np.mean([r[f"selected_{k}"][d] - r["full"][d] for d in DOMAINS]))
        rnd = float(np.mean([r[f"random_{k}"][d] - r["full"][d] for d in DOMAINS]))
        m[f"delta_{k}"], m[f"delta_random_{k}"] = sel, rnd
        m[f"rel_increase_{k}"] = sel / full
        # memory of the pruned model: routed-expert weights scale with the kept share
        m[f"params_kept_{k}"] = (total - experts * (r["num_experts"] - k)) / total
    return m


def _higher_is_better(metric: str) -> bool | None:
    if metric.startswith("params_kept"):
        return None
    return metric == "nmi"


def summarize(per_seed: list[dict[str, Any]], cfg: dict[str, Any]) -> tuple[list, list, dict]:
    """Rows ``(method, metric, values, higher_is_better)``, claims and per-seed extras."""
    E = cfg["model"]["num_experts"]
    sizes = [round(f * E) for f in cfg["fractions"]]
    table: dict[str, dict[str, list[float]]] = {name: {} for name in MODELS}
    per_seed_rows = []
    for seed_out in per_seed:
        for name in MODELS:
            r = {**seed_out[name], "num_experts": E}
            for key, v in _metrics(r, sizes).items():
                table[name].setdefault(key, []).append(v)
            per_seed_rows.append(
                {
                    "model": name,
                    **{d: round(r["full"][d], 4) for d in DOMAINS},
                    "nmi": round(r["nmi"], 3),
                }
            )
    rows = [
        (name, key, vals, _higher_is_better(key))
        for name in MODELS
        for key, vals in table[name].items()
    ]
    mean = {n: {k: float(np.mean(v)) for k, v in table[n].items()} for n in MODELS}
    return rows, claims(mean, sizes), {"per_seed": per_seed_rows}


def ratio_claim(text: str, value: float, reference: float, scale: float) -> Claim:
    """``value <= scale * reference`` for loss increases; not measured when the reference shows
    no degradation (a ratio of a non-positive Delta tests nothing)."""
    if not reference > 0:
        return check(
            text,
            False,
            f"{value:.4g} vs {reference:.4g} (reference Delta <= 0)",
            inputs=[value, reference],
            degenerate=True,
        )
    return compare(text, value, "<=", reference, scale=scale)


def claims(mean: dict[str, dict[str, float]], sizes: list[int]) -> list:
    """The spec's claims (means over seeds); thresholds are the spec's."""
    emo, std = mean["emo"], mean["standard"]
    big, small = sizes
    d_emo, d_std = emo[f"delta_{big}"], std[f"delta_{big}"]
    s_emo, s_std = emo[f"delta_{small}"], std[f"delta_{small}"]
    return [
        compare(
            f"calibration: standard MoE's {big}-expert Delta >= 2 % of its full loss "
            "(room for EMO)",
            d_std,
            ">=",
            std["loss_full"],
            scale=0.02,
        ),
        compare(
            "full model: EMO mean test loss <= 1.03 x standard MoE",
            emo["loss_full"],
            "<=",
            std["loss_full"],
            scale=1.03,
        ),
        ratio_claim(
            f"25 % ({big} experts): EMO Delta <= 0.5 x standard MoE Delta", d_emo, d_std, 0.5
        ),
        compare(
            f"25 % ({big} experts): EMO relative loss increase <= 10 %",
            emo[f"rel_increase_{big}"],
            "<=",
            0.10,
        ),
        ratio_claim(
            f"12.5 % ({small} experts): EMO Delta <= 0.6 x standard MoE Delta", s_emo, s_std, 0.6
        ),
        ratio_claim(
            f"EMO: selected {big}-expert subsets Delta <= 0.5 x random subsets",
            d_emo,
            emo[f"delta_random_{big}"],
            0.5,
        ),
        ratio_claim(
            f"EMO: selected {small}-expert subsets Delta <= 0.5 x random subsets",
            s_emo,
            emo[f"delta_random_{small}"],
            0.5,
        ),
        compare(
            "domain purity: NMI(EMO) >= NMI(standard) + 0.2",
            emo["nmi"],
            ">=",
            std["nmi"],
            margin=0.2,
        ),
    ]
