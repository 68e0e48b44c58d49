"""Slow, obviously correct float64 references (loops, brute force)."""

import numpy as np


def prototype_probabilities_reference(f, mu_fg, mu_bg, tau):
    """p_i = sigmoid((cos(f_i, mu_fg) - max_k cos(f_i, mu_bg_k)) / tau), one pixel at a time."""
    f, mu_fg, mu_bg = (np.asarray(v, dtype=np.float64) for v in (f, mu_fg, mu_bg))

    def cos(u, v):
        return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))

    out = []
    for i in range(f.shape[0]):
        best_bg = max(cos(f[i], mu_bg[k]) for k in range(mu_bg.shape[0]))
        out.append(1.0 / (1.0 + np.exp(-(cos(f[i], mu_fg) - best_bg) / tau)))
    return np.array(out)


def propagate_reference(a, w, k):
    """minmax(W^k a) with an explicit matrix power (k >= 1)."""
    v = (
        np.linalg.matrix_power(np.asarray(w, dtype=np.float64), k)
        @ np.asarray(a, np.float64).ravel()
    )
    return (v - v.min()) / (v.max() - v.min())


def iou_reference(pred, gt):
    """IoU of one pair of masks, counting pixels in a loop (empty/empty -> 1)."""
    inter = union = 0
    for p, g in zip(np.asarray(pred).ravel(), np.asarray(gt).ravel(), strict=True):
        inter += bool(p) and bool(g)
        union += bool(p) or bool(g)
    return 1.0 if union == 0 else inter / union


def auroc_reference(scores, labels):
    """P(score_pos > score_neg) + 0.5 P(tie), over all pairs."""
    s, y = np.asarray(scores, float), np.asarray(labels, bool)
    pos, neg = s[y], s[~y]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))
