"""Brute-force references the fast code is tested against, written from the definitions.

Loaded by ``conftest.py`` as ``preg_reference`` (every package's tests share one run).
"""

import math

import numpy as np


def neg_entropy(logits):
    """-H of the softmax of each row, summed term by term (zero-probability terms skipped)."""
    out = []
    for row in logits:
        p = np.exp(row - row.max())
        p /= p.sum()
        out.append(sum(pi * np.log(pi) for pi in p if pi > 0))
    return np.array(out)


def lowest_group(conf, window):
    """The smallest mean over every window of ``window`` consecutive confidences."""
    return min(conf[i : i + window].mean() for i in range(len(conf) - window + 1))


def majority_accuracy(k, p):
    """P(majority of ``k`` i.i.d. votes is right), ties broken by a fair coin: the binomial sum."""
    return sum(
        math.comb(k, j) * p**j * (1 - p) ** (k - j) * (1.0 if 2 * j > k else 0.5 * (2 * j == k))
        for j in range(k + 1)
    )
