"""Dense float64 reference of ES / ESSAM / accelerated ESSAM written from the equations.

Noise vectors eps(s) are materialised densely (concatenation over tensors of
``zo.sample(p, zo.tensor_generator(s, j))``, drawn in the parameters' dtype and then cast to
float64); every other operation is plain float64 linear algebra on the flat d-vector.
"""

import math

import numpy as np
import torch

from methodkit import zo


def dense_noise(templates, seed):
    return torch.cat(
        [
            zo.sample(p, zo.tensor_generator(seed, j, p.device)).double().reshape(-1)
            for j, p in enumerate(templates)
        ]
    )


def shape(r, shaping="zscore"):
    r = np.asarray(r, dtype=np.float64)
    if shaping == "zscore":
        return (r - r.mean()) / (np.std(r, ddof=1) + 1e-8)
    raise NotImplementedError(shaping)


def members(seed, phase, t, n):
    return [zo.derive_seed(seed, phase, t, i) for i in range(n)]


def reference_run(
    templates,
    theta0,
    reward,
    *,
    steps,
    n,
    sigma,
    lr,
    rho,
    variant,
    seed=0,
    weight_decay=0.0,
    sam_refresh=0,
):
    """Return the list of flat float64 thetas after each step.

    ``reward`` maps a flat float64 vector to a float; ``templates`` are tensors with the
    parameters' shapes and dtype (for the noise); ``theta0`` is the flat float64 start.
    """
    theta = theta0.clone()
    d = theta.numel()
    rho_abs = 0.05 * sigma * math.sqrt(d) if rho == "auto" else rho
    prev = None  # (eps list, coeff list) of the previous update estimate
    out = []
    for t in range(steps):
        offset = torch.zeros(d, dtype=torch.float64)
        if variant != "es" and rho_abs > 0:
            fresh = variant == "standard" or t == 0 or (sam_refresh and t % sam_refresh == 0)
            if fresh:
                eps = [dense_noise(templates, s) for s in members(seed, 0, t, n)]
                r = [reward(theta + sigma * e) for e in eps]
                c = shape(r) / n
            else:
                eps, c = prev
            g = sum(ci * e for ci, e in zip(c, eps, strict=False))  # g_hat = sum_i c_i eps_i
            norm = float(torch.linalg.vector_norm(g))
            if norm > 0:
                offset = -rho_abs * g / norm  # delta* = -rho g/||g||
        theta_adv = theta + offset
        eps2 = [dense_noise(templates, s) for s in members(seed, 1, t, n)]
        r2 = [reward(theta_adv + sigma * e) for e in eps2]
        f2 = shape(r2)
        theta = (1 - lr * weight_decay) * theta
        theta = theta + lr / n * sum(fi * e for fi, e in zip(f2, eps2, strict=False))
        prev = (eps2, f2 / n)
        out.append(theta.clone())
    return out
