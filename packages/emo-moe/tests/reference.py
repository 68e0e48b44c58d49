"""Slow, obviously correct references (float64, loops, numpy) the fast code is tested against."""

import numpy as np
import torch


def pools_reference(probs, doc_ids, sizes):
    """Per-document pools by brute force: top-m of summed probabilities (ties: lower index)."""
    probs = np.asarray(probs, dtype=np.float64)
    doc_ids = np.asarray(doc_ids)
    pools, k = [], 0
    for b in range(doc_ids.shape[0]):
        for d in dict.fromkeys(doc_ids[b].tolist()):  # documents in order of appearance
            u = probs[b][doc_ids[b] == d].sum(axis=0)
            m = int(sizes[k]) if np.ndim(sizes) else int(sizes)
            order = sorted(range(len(u)), key=lambda e: (-u[e], e))
            pools.append(set(order[:m]))
            k += 1
    return pools


def load_balancing_reference(indices_list, probs_list, num_experts, top_k):
    """(E / k) sum_e f_e P_e with explicit loops over tokens, mean over layers."""
    out = []
    for idx, probs in zip(indices_list, probs_list, strict=True):
        idx = np.asarray(idx).reshape(-1, top_k)
        probs = np.asarray(probs, dtype=np.float64).reshape(-1, num_experts)
        T = idx.shape[0]
        total = 0.0
        for e in range(num_experts):
            f = sum(1 for t in range(T) if e in idx[t]) / T
            p = sum(probs[t, e] for t in range(T)) / T
            total += f * p
        out.append(num_experts / top_k * total)
    return float(np.mean(out))


def moe_reference(layer, h, allowed=None):
    """Dense float64 MoE: every token through its top-k experts and all shared experts."""
    layer = layer.double()
    x = h.double().reshape(-1, h.shape[-1])
    logits = layer.router.gate(x)
    if allowed is not None:
        logits = logits.masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    y = torch.zeros_like(x)
    for t in range(x.shape[0]):
        w, idx = torch.topk(probs[t], layer.top_k)
        if layer.router.norm_topk_prob:
            w = w / w.sum()
        for wi, e in zip(w, idx.tolist(), strict=True):
            y[t] += wi * layer.experts[e](x[t])
        for s in layer.shared_experts:
            y[t] += s(x[t])
    return y.view(h.shape)
