"""Shared test helpers (imported via the path set in conftest)."""

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
