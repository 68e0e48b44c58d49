"""Float64 brute-force references the engines are tested against, written from the definitions."""

import itertools

import numpy as np
import torch


def brute_force_posterior(logits, y, program):
    """Posterior marginals ``P(z_i = k | x, y)`` and ``log p(y | x)`` by listing every state.

    ``p(z | x) = prod_i softmax(logits_i)[z_i]``; the posterior keeps the states the program
    calls consistent with ``y`` and renormalises. Loops over ``prod(domains)`` states, so only
    for tiny programs.

    Returns:
        ``(marginals (B, n, K), log_evidence (B,))`` as float64 tensors.
    """
    logp = torch.log_softmax(logits.double(), -1).numpy()  # (B, n, K)
    batch, n, k = logp.shape
    states = np.array(list(itertools.product(*(range(d) for d in program.domains))))
    log_joint = sum(logp[:, i, states[:, i]] for i in range(n))  # (B, S)
    ok = program.consistent(np.broadcast_to(states, (batch, *states.shape)), y)
    log_joint = np.where(ok, log_joint, -np.inf)
    log_evidence = np.logaddexp.reduce(log_joint, axis=1)
    w = np.exp(log_joint - log_evidence[:, None])
    marginals = np.zeros((batch, n, k))
    for i in range(n):
        for v in range(k):
            marginals[:, i, v] = w[:, states[:, i] == v].sum(1)
    return torch.from_numpy(marginals), torch.from_numpy(log_evidence)


def fisher_logit_gradient(logits, marginals):
    """Gradient of the mean ``-log p(y | x)`` with respect to factorised logits.

    ``grad log p(y | x) = E_q[grad log p(z | x)]`` gives, per logit, ``(softmax - q) / B``.
    """
    return (logits.softmax(-1) - marginals) / logits.shape[0]
