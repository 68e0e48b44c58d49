"""Brute-force references the tests check eva0 against.

Each function recomputes one quantity the slow, obvious way: one sample at a time, with
autograd, or from the textbook formula, in the dtype of its inputs (float64 in the tests).
"""

import torch


def entropy(logits):
    """Shannon entropy ``-sum_c p_c log p_c`` of ``softmax(logits)`` per row."""
    p = torch.softmax(logits, 1)
    return -(p * p.log()).sum(1)


def per_sample_forward(net, stacks, x):
    """Run ``net`` on each sample ``i`` with parameters ``stacks[name][i]`` copied in (a loop)."""
    params = dict(net.named_parameters())
    rows = []
    for i in range(x.shape[0]):
        with torch.no_grad():
            orig = {n: params[n].clone() for n in stacks}
            for n in stacks:
                params[n].copy_(stacks[n][i])
            rows.append(net(x[i : i + 1]))
            for n in stacks:
                params[n].copy_(orig[n])
    return torch.cat(rows)


def functional_per_sample_forward(net, stacks, x):
    """Like :func:`per_sample_forward`, through ``torch.func.functional_call``."""
    rows = [
        torch.func.functional_call(net, {n: s[i] for n, s in stacks.items()}, (x[i : i + 1],))
        for i in range(x.shape[0])
    ]
    return torch.cat(rows)


def dense_directional_gradient(loss, x, weight, bias, z):
    """``(1/B) sum_i (z_i . grad_b loss(x_i W^T + b)) z_i`` for a linear head, with autograd.

    The limit ``eps -> 0`` of EVA-0's per-sample symmetric estimate of the bias gradient.
    """
    b = bias.detach().clone().requires_grad_(True)
    dense = torch.zeros_like(b)
    n = x.shape[0]
    for i in range(n):
        li = loss(x[i : i + 1] @ weight.T + b)[0]
        (grad,) = torch.autograd.grad(li, b)
        dense += (z[i] @ grad) * z[i] / n
    return dense


def tent_sgd_step(model, x, lr, loss_fn):
    """The parameters after Tent's first step: ``theta - lr * grad mean_i loss(model(x))_i``.

    Only parameters whose name contains ``norm`` move (momentum has no effect on step one).
    """
    named = dict(model.named_parameters())
    names = [n for n in named if "norm" in n]
    loss = loss_fn(model(x)).mean()
    grads = torch.autograd.grad(loss, [named[n] for n in names])
    return {n: named[n].detach() - lr * g for n, g in zip(names, grads, strict=True)}
