"""Slow, obviously correct references the fast code is tested against."""


def trimmed_mean_reference(values, trim):
    xs = sorted(float(v) for v in values)
    k = int(trim * len(xs))
    kept = xs[k : len(xs) - k]
    return sum(kept) / len(kept)
