"""Slow, obviously correct references the fast code is tested against (float64, loops)."""

from __future__ import annotations

import itertools
import math

import torch


def grpo_loss_reference(logp, logp_old, logp_ref, adv, mask, eps, eps_high, beta, loss_type,
                        max_len):  # fmt: skip
    """The GRPO loss written token by token, sequence by sequence."""
    N, T = logp.shape
    per_seq, total, n_tok = [], 0.0, 0
    for i in range(N):
        s, cnt = 0.0, 0
        for t in range(T):
            if mask[i, t] == 0:
                continue
            rho = torch.exp(logp[i, t] - logp_old[i, t])
            clipped = torch.clamp(rho, 1 - eps, 1 + eps_high)
            term = -torch.minimum(rho * adv[i], clipped * adv[i])
            if beta > 0:
                d = logp_ref[i, t] - logp[i, t]
                term = term + beta * (torch.exp(d) - d - 1)
            s = s + term
            cnt += 1
        per_seq.append(s / max(cnt, 1))
        total = total + s
        n_tok += cnt
    if loss_type == "grpo":
        return sum(per_seq) / N
    if loss_type in ("bnpo", "dapo"):
        return total / max(n_tok, 1)
    return total / (N * max_len)


def advantages_reference(rewards, G, scale):
    """TRL's formula with plain Python statistics (Bessel-corrected std)."""
    out = []
    allr = list(rewards)
    mb = sum(allr) / len(allr)
    sb = math.sqrt(sum((x - mb) ** 2 for x in allr) / (len(allr) - 1))
    for k in range(0, len(allr), G):
        g = allr[k : k + G]
        m = sum(g) / G
        s = math.sqrt(sum((x - m) ** 2 for x in g) / (G - 1))
        for x in g:
            if scale == "group":
                out.append((x - m) / (s + 1e-4))
            elif scale == "batch":
                out.append((x - m) / (sb + 1e-4))
            else:
                out.append(x - m)
    return out


def best_matching_total(sim):
    """Maximum total similarity of a one-to-one matching, by brute force over permutations."""
    n, m = len(sim), len(sim[0]) if sim else 0
    best = 0.0
    if n == 0 or m == 0:
        return 0.0
    k = min(n, m)
    for rows in itertools.permutations(range(n), k):
        for cols in itertools.permutations(range(m), k):
            best = max(best, sum(sim[r][c] for r, c in zip(rows, cols, strict=False)))
    return best


def lcs_reference(a, b):
    """Longest common subsequence length by plain recursion with memo."""
    memo = {}

    def f(i, j):
        if i == len(a) or j == len(b):
            return 0
        if (i, j) not in memo:
            memo[i, j] = f(i + 1, j + 1) + 1 if a[i] == b[j] else max(f(i + 1, j), f(i, j + 1))
        return memo[i, j]

    return f(0, 0)
