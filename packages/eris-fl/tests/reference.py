"""References written from the equations, with one central server: what ERIS must reproduce."""

import torch

from eris_fl import flatten
from eris_fl._eris import participants
from eris_fl._seeding import COMPRESS, LOCAL, derived_generator


def hand_fedavg(model, data, trainer, weights, rounds, seed, server_lr=1.0, per_round=None):
    """FedAvg written from the equations: x <- x + lr * sum_k p_k u_k."""
    x = flatten(model).clone()
    sizes = [len(y) for _, y in data]
    for t in range(rounds):
        clients = participants(len(data), per_round, seed, t)
        raw = [float(sizes[k]) for k in clients] if weights == "samples" else [1.0] * len(clients)
        p = [w / sum(raw) for w in raw]
        v = torch.zeros_like(x)
        for k, w in zip(clients, p, strict=True):
            u = trainer.update(model, x.clone(), data[k], derived_generator(seed, t, k, LOCAL))
            v += w * u
        x = x + server_lr * v
    return x


def centralised_diana(model, data, trainer, comp, alpha, rounds, seed, server_lr=1.0):
    """DIANA-compressed FedAvg written from the equations with one central server."""
    x = flatten(model).clone()
    d = x.numel()
    sizes = [len(y) for _, y in data]
    p = [n / sum(sizes) for n in sizes]
    h = [torch.zeros(d, dtype=x.dtype) for _ in data]
    s = torch.zeros(d, dtype=x.dtype)
    for t in range(rounds):
        v = s.clone()
        for k in range(len(data)):
            u = trainer.update(model, x.clone(), data[k], derived_generator(seed, t, k, LOCAL))
            c = comp(u - h[k], derived_generator(seed, t, k, COMPRESS))
            h[k] = h[k] + alpha * c
            v += p[k] * c
        s = s + alpha * (v - s)
        x = x + server_lr * v
    return x
