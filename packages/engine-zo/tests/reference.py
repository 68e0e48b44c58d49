"""Float64 references the optimizers are tested against: noise, probes, updates, ENGINE's xi.

Everything here is written densely from the equations (no optimizer code is reused), so a test
that compares an optimizer with these helpers checks the algorithm, not a copy of it.
"""

import math

import torch

from methodkit import zo


def theta0(toy):
    """The toy's parameters as float64 copies (the point a step starts from)."""
    return [p.detach().double().clone() for p in toy.parameters()]


def gaussian(step_seed, i, shape):
    """The Gaussian noise of tensor ``i`` under ``step_seed``, in float64."""
    return torch.randn(shape, generator=zo.tensor_generator(step_seed, i)).double()


def check_probes(rec, theta0, xi, eps, first=0):
    """The two recorded probes are ``theta0 +- eps * xi``."""
    for point, sign in ((rec.points[first], 1), (rec.points[first + 1], -1)):
        for p, t0, x in zip(point, theta0, xi, strict=True):
            torch.testing.assert_close(p.double(), t0 + sign * eps * x, atol=1e-6, rtol=0)


def check_update(toy, expected):
    """The toy's parameters equal the float64 ``expected`` values."""
    for p, e in zip(toy.parameters(), expected, strict=True):
        torch.testing.assert_close(p.detach().double(), e, atol=1e-6, rtol=0)


def engine_direction(opt, toy, step, gamma, eps):
    """xi of a coarse step written densely in float64 from the algorithm's equations.

    The injection coefficient ``a`` is drawn from ``Generator().manual_seed(derive_seed(seed,
    7))``, spelled out here (the optimizer uses ``methodkit.torch.generator(seed, 7)``).
    """
    seed = zo.derive_seed(opt.seed, 0, step)
    basis = zo.derive_seed(opt.seed, 1, step // opt.cycle_length)
    W, b = toy.weight, toy.bias
    r = opt.ranks[0]
    U = torch.randn((6, r), generator=zo.tensor_generator(seed, 0)).double()
    V = torch.randn((5, r), generator=zo.tensor_generator(basis, 0)).double()
    sub = [U @ V.T / math.sqrt(r), torch.randn(6, generator=zo.tensor_generator(seed, 1)).double()]
    state = opt.state_dict()["zo"]
    h = [torch.zeros(6, 5, dtype=torch.float64), torch.zeros(6, dtype=torch.float64)]
    for s, d in zip(state["buffer_seeds"], state["buffer_half_diffs"], strict=True):
        for i, p in enumerate((W, b)):
            h[i] += d / eps * torch.randn(p.shape, generator=zo.tensor_generator(s, i)).double()
    h_norm = math.sqrt(sum(float((t**2).sum()) for t in h))
    sub_norm = math.sqrt(sum(float((t**2).sum()) for t in sub))
    a = float(
        torch.randn(
            (),
            generator=torch.Generator().manual_seed(zo.derive_seed(seed, 7)),
            dtype=torch.float64,
        )
    )
    return [
        math.sqrt(1 - gamma) * s + math.sqrt(gamma) * a * sub_norm * t / h_norm
        for s, t in zip(sub, h, strict=True)
    ], h
