"""References the tests check hel against, and the float64 models and batches they use.

``bptt_loss``/``bptt_grads`` are autograd through
the unrolled network (BPTT, the reference of every estimator); ``immediate_gradient`` and
``eprop_brute_force`` recompute truncated BPTT with k = 1 and e-prop step by step with
autograd Jacobians.
"""

import torch

from hel import EchoRNN, HopfieldOscillatorCell, RateEchoCell


def make_model(readout="mean", n=5, m=2, out=3, seed=1, cell="hopfield", dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    if cell == "hopfield":
        c = HopfieldOscillatorCell(m, n, dt=0.2, generator=g)
    else:
        c = RateEchoCell(m, n, dt=0.2, generator=g)
    with torch.no_grad():
        c.b.normal_(generator=g)  # nonzero biases
    model = EchoRNN(c, out, readout=readout)
    with torch.no_grad():  # head from the same generator: tests do not depend on global RNG
        model.head.weight.uniform_(-1, 1, generator=g).mul_(n**-0.5)
        model.head.bias.uniform_(-0.1, 0.1, generator=g)
    model = model.to(dtype)
    return model


def make_batch(readout="mean", B=3, T=30, m=2, out=3, seed=2, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, m, generator=g, dtype=dtype)
    if readout == "sequence":
        y = torch.randn(B, T, out, generator=g, dtype=dtype)
        loss = torch.nn.MSELoss()
    else:
        y = torch.randint(0, out, (B,), generator=g)
        loss = torch.nn.CrossEntropyLoss()
    return x, y, loss


def cell_grads(model, est, x, y):
    model.zero_grad(set_to_none=True)
    est.backward(x, y)
    grads = [p.grad.clone() for p in model.cell.parameters()]
    model.zero_grad(set_to_none=True)
    return grads


def bptt_loss(model, x, y, loss):
    return lambda: model.compute_loss(model(x), y, loss)


def bptt_grads(model, x, y, loss):
    """Autograd BPTT gradient of the cell parameters."""
    return list(torch.autograd.grad(bptt_loss(model, x, y, loss)(), list(model.cell.parameters())))


def immediate_gradient(model, x, y, loss):
    """Per-step gradient of ``l_t`` through one step from the detached previous state (k = 1)."""
    cell, T = model.cell, x.shape[1]
    params = list(cell.parameters())
    ref = [torch.zeros_like(p) for p in params]
    phi = pi = torch.zeros(x.shape[0], cell.hidden_size, dtype=torch.float64)
    for t in range(T):  # one step from the detached previous state, its own loss only
        phi0, pi0 = phi.detach(), pi.detach()
        half = phi0 + 0.5 * cell.dt * pi0
        pi = pi0 + cell.dt * cell.force(half, x[:, t])
        phi = half + 0.5 * cell.dt * pi
        lt = loss(model.head(phi), y[:, t]) / T
        for r, g in zip(ref, torch.autograd.grad(lt, params), strict=True):
            r += g
    return ref


def eprop_brute_force(model, x, y, loss):
    """Brute force: autograd step Jacobians with off-diagonal neuron blocks masked."""
    cell, h = model.cell, model.cell.dt
    n = cell.hidden_size
    A, Bm, b, ar = (p.detach() for p in cell.parameters())
    W0 = 0.5 * (A + A.T)

    def step(z, u, W, Bm, b, ar):  # unconstrained W: W_ij acts on neuron i only
        phi, pi = z[:n], z[n:]
        half = phi + 0.5 * h * pi
        s = torch.tanh(half)
        f = -torch.nn.functional.softplus(ar) * half + (1 - s * s) * (W @ s + Bm @ u + b)
        pi2 = pi + h * f
        return torch.cat([half + 0.5 * h * pi2, pi2])

    thetas = (W0, Bm, b, ar)
    mask = torch.zeros(2 * n, 2 * n, dtype=torch.float64)
    for i in range(n):
        for a in (i, i + n):
            mask[a, i] = mask[a, i + n] = 1.0
    out_grads = [torch.zeros_like(t) for t in thetas]
    Bsz, T = x.shape[:2]
    z_all = torch.zeros(Bsz, 2 * n, dtype=torch.float64)
    elig = [torch.zeros(Bsz, 2 * n, *t.shape, dtype=torch.float64) for t in thetas]
    for t in range(T):
        new_elig = []
        for bi in range(Bsz):
            z, u = z_all[bi], x[bi, t]
            Jz = torch.autograd.functional.jacobian(lambda zz, u=u: step(zz, u, *thetas), z) * mask
            Jth = torch.autograd.functional.jacobian(lambda *th, z=z, u=u: step(z, u, *th), thetas)
            new_elig.append(
                [torch.tensordot(Jz, e[bi], dims=1) + jt for e, jt in zip(elig, Jth, strict=True)]
            )
        elig = [torch.stack([ne[k] for ne in new_elig]) for k in range(len(thetas))]
        z_all = torch.stack([step(z_all[bi], x[bi, t], *thetas) for bi in range(Bsz)]).detach()
        if model.readout == "sequence":
            p = z_all[:, :n].clone().requires_grad_(True)
            (L_t,) = torch.autograd.grad(loss(model.head(p), y[:, t]) / T, p)
            for k, e in enumerate(elig):
                out_grads[k] += torch.einsum("bi,bi...->...", L_t, e[:, :n])
    g_W = out_grads[0]
    return [0.5 * (g_W + g_W.T), *out_grads[1:]]
