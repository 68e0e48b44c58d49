"""Slow, obviously correct references (float64 loops) for the easylens tests."""

from __future__ import annotations

import numpy as np


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def margin_reference(
    z: np.ndarray,
    protos: np.ndarray,
    refs: np.ndarray,
    grid: tuple[int, int],
    window: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(c, e_N)`` by a double loop over tokens and references, float64.

    ``z [N, d]``; ``refs [R, N, d]`` position references (``window`` r) or ``[K, d]`` centroids
    (``window=None``).
    """
    z, protos, refs = (np.asarray(a, dtype=np.float64) for a in (z, protos, refs))
    w = grid[1]
    c, e_n = np.zeros(len(z)), np.zeros(len(z))
    for i in range(len(z)):
        zi = _unit(z[i])
        e_l = max(float(zi @ _unit(p)) for p in protos)
        best = -np.inf
        if window is None:
            for n in refs:
                best = max(best, float(zi @ _unit(n)))
        else:
            yi, xi = divmod(i, w)
            for r in range(refs.shape[0]):
                for j in range(refs.shape[1]):
                    yj, xj = divmod(j, w)
                    if abs(yj - yi) <= window and abs(xj - xi) <= window:
                        best = max(best, float(zi @ _unit(refs[r, j])))
        c[i], e_n[i] = e_l - best, best
    return c, e_n


def components_reference(grid: np.ndarray) -> list[set[tuple[int, int]]]:
    """8-connected components of a bool grid by breadth-first search."""
    grid = np.asarray(grid, dtype=bool)
    seen: set[tuple[int, int]] = set()
    comps = []
    for start in zip(*np.nonzero(grid), strict=True):
        start = (int(start[0]), int(start[1]))
        if start in seen:
            continue
        comp, queue = set(), [start]
        seen.add(start)
        while queue:
            y, x = queue.pop()
            comp.add((y, x))
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    q = (y + dy, x + dx)
                    if (
                        0 <= q[0] < grid.shape[0]
                        and 0 <= q[1] < grid.shape[1]
                        and grid[q]
                        and q not in seen
                    ):
                        seen.add(q)
                        queue.append(q)
        comps.append(comp)
    return comps


def weights_reference(
    grid: np.ndarray, ring_weight: float, kappa: float, max_gain: float, max_area: float
) -> tuple[np.ndarray, np.ndarray]:
    """Morphology weights and gains by explicit loops (see ``easylens.morphology_weights``)."""
    grid = np.asarray(grid, dtype=bool)
    w, gain = np.zeros(grid.shape), np.zeros(grid.shape)
    kept = [c for c in components_reference(grid) if len(c) <= max_area * grid.size]
    core = {p for c in kept for p in c}
    for comp in kept:
        g = min(max_gain, 1 + kappa / len(comp))
        for p in comp:
            w[p], gain[p] = 1.0, g
    for comp in kept:
        g = min(max_gain, 1 + kappa / len(comp))
        for y, x in comp:
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    q = (y + dy, x + dx)
                    if 0 <= q[0] < grid.shape[0] and 0 <= q[1] < grid.shape[1] and q not in core:
                        w[q] = ring_weight
                        gain[q] = max(gain[q], g)
    return w, gain
