"""Seeded spherical k-means (cosine) with k-means++ initialisation."""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as nnf


def spherical_kmeans(x: torch.Tensor, k: int, seed: int, iters: int = 30) -> torch.Tensor:
    """Cluster unit vectors ``x [n, d]`` into ``k`` unit centroids (cosine assignment).

    Deterministic for a fixed ``seed``; ``k`` is capped at ``n``.
    """
    x = nnf.normalize(x.double(), dim=-1)
    n = x.shape[0]
    k = min(k, n)
    rng = np.random.default_rng(seed)
    idx = [int(rng.integers(n))]
    dist = (1 - x @ x[idx[0]]).clamp_min(0)
    for _ in range(1, k):  # k-means++ on the cosine distance
        p = dist.cpu().numpy() ** 2
        total = p.sum()
        j = int(rng.choice(n, p=p / total)) if total > 0 else int(rng.integers(n))
        idx.append(j)
        dist = torch.minimum(dist, (1 - x @ x[j]).clamp_min(0))
    c = x[idx].clone()
    for _ in range(iters):
        assign = (x @ c.T).argmax(dim=1)
        new = torch.zeros_like(c).index_add_(0, assign, x)
        empty = new.norm(dim=1) == 0
        new[empty] = c[empty]  # keep a centroid that lost all its members
        new = nnf.normalize(new, dim=-1)
        if torch.allclose(new, c):
            break
        c = new
    return c
