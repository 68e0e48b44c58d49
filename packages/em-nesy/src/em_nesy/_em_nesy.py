"""EM-NeSy: the E-step, the M-step loss and the training loop (the paper's algorithm).

Algorithm (one iteration on a batch ``(x, y)``):

1. forward: ``logits = model(x)``, shape ``(B, n, K)``, ``p_theta(z_i | x_i) = softmax``;
2. E-step (no gradients): ``q = engine.posterior(logits.detach(), y)``, the posterior
   marginals ``q_i(k) = P(z_i = k | x, y)`` (exact or approximate);
3. M-step: ``m_steps`` optimizer steps on
   ``Q(theta) = -1/|V| sum_{b in V} sum_i sum_k q_bi(k) log p_theta(z_i = k | x_bi)`` with ``q``
   fixed, over the valid examples ``V``.

Because ``grad log p(y | x) = E_{p(z | x, y)}[grad log p(z | x)]``, exact ``q`` and one M-step give
exactly the gradient of the exact-gradient baseline :func:`~em_nesy.baselines.nesy_nll` (per
logit: ``softmax - q``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from em_nesy._base import InferenceEngine, Logits, Posterior, reduce_valid, warn_if_all_invalid

__all__ = ["EMNeSy", "Posterior", "e_step", "em_loss", "em_loss_from_samples"]


def _detach(logits: Logits) -> Logits:
    if isinstance(logits, torch.Tensor):
        return logits.detach()
    return [t.detach() for t in logits]


def e_step(logits: Logits, y: Any, engine: InferenceEngine) -> Posterior:
    """Posterior over the symbols given the labels, computed without gradients.

    Args:
        logits: ``(B, n, K)`` tensor or list of ``(B, K_i)`` tensors (detached here).
        y: Labels, in the form the engine's program expects.
        engine: Any object with ``posterior(logits, y)``.

    Returns:
        The engine's :class:`Posterior` (nothing in it requires grad).

    Raises:
        TypeError: If ``engine`` has no ``posterior`` method.
    """
    if not hasattr(engine, "posterior"):
        raise TypeError(f"engine must have a posterior(logits, y) method, got {engine!r}")
    with torch.no_grad():
        post = engine.posterior(_detach(logits), y)
    warn_if_all_invalid(post.valid, "e_step")
    return post


def em_loss(logits: Logits, posterior: Posterior, reduction: str = "mean") -> torch.Tensor:
    """M-step objective: soft cross-entropy to the posterior marginals over valid examples.

    ``Q = -sum_i sum_k q_i(k) log softmax(logits_i)_k`` per example.

    Args:
        logits: The network's logits (with gradients), same layout as in the E-step.
        posterior: Output of :func:`e_step`.
        reduction: ``"mean"`` over valid examples, ``"sum"``, or ``"none"`` (``(B,)``, 0 for
            invalid rows).

    Returns:
        The loss (0 with a warning when no example is valid).

    Raises:
        ValueError: If shapes disagree or ``reduction`` is unknown.
    """
    q = posterior.marginals.detach()
    if isinstance(logits, torch.Tensor):
        if logits.ndim != 3 or logits.shape[:2] != q.shape[:2] or logits.shape[2] > q.shape[2]:
            raise ValueError(
                f"posterior marginals {tuple(q.shape)} do not match logits {tuple(logits.shape)}"
            )
        qt = q[:, :, : logits.shape[2]].to(logits)
        per_example = -(qt * logits.log_softmax(-1)).sum(dim=(1, 2))
        return reduce_valid(per_example, posterior.valid.to(per_example.device), reduction)
    parts = list(logits)
    if len(parts) != q.shape[1] or parts[0].shape[0] != q.shape[0]:
        raise ValueError(
            f"posterior marginals {tuple(q.shape)} do not match logits for {len(parts)} symbols "
            f"and batch {parts[0].shape[0]}"
        )
    per_example = torch.zeros(q.shape[0], dtype=parts[0].dtype, device=parts[0].device)
    for i, t in enumerate(parts):
        qi = q[:, i, : t.shape[1]].to(t)
        per_example = per_example - (qi * t.log_softmax(-1)).sum(-1)
    return reduce_valid(per_example, posterior.valid.to(per_example.device), reduction)


def em_loss_from_samples(
    log_prob_fn: Callable[[torch.Tensor], torch.Tensor],
    posterior: Posterior,
    reduction: str = "mean",
) -> torch.Tensor:
    """Sample-based M-step for symbol distributions that are not factorised.

    ``-sum_s w_s log p_theta(z^s | x)`` per example, from a sampling engine's weighted samples.

    Args:
        log_prob_fn: Maps samples ``(B, S, n)`` (long) to ``log p_theta(z | x)``, ``(B, S)``.
        posterior: A posterior carrying ``samples`` and ``weights``.
        reduction: As in :func:`em_loss`.

    Returns:
        The loss.

    Raises:
        ValueError: If the posterior has no samples or ``log_prob_fn`` returns a wrong shape.
    """
    if posterior.samples is None or posterior.weights is None:
        raise ValueError("posterior has no samples; use a sampling engine or StochasticEM")
    logp = log_prob_fn(posterior.samples)
    if logp.shape != posterior.weights.shape:
        raise ValueError(
            f"log_prob_fn returned shape {tuple(logp.shape)}, "
            f"expected {tuple(posterior.weights.shape)}"
        )
    per_example = -(posterior.weights.detach().to(logp) * logp).sum(dim=1)
    return reduce_valid(per_example, posterior.valid.to(per_example.device), reduction)


class EMNeSy:
    r"""Train a neural symbol predictor from labels with EM (the paper's EM-NeSy loop).

    Each :meth:`train_step` runs the forward pass, an E-step with ``engine`` on the detached
    logits (no gradients through the symbolic side), then ``m_steps`` optimizer steps on the
    soft cross-entropy :func:`em_loss` with the posterior held fixed:

    .. math::
        q = p_{\\theta_t}(z \\mid x, y), \\qquad
        \\theta \\leftarrow \\theta - \\eta \\nabla_\\theta
        \\Big(-\\sum_i \\sum_k q_i(k) \\log p_\\theta(z_i = k \\mid x_i)\\Big).

    With an exact engine and ``m_steps=1`` this is the exact-gradient NeSy update on
    ``-log p(y | x)``.

    Args:
        model: Maps inputs to symbol logits ``(B, n, K)`` (or a list of ``(B, K_i)``).
        engine: E-step engine (see :mod:`em_nesy.engines`).
        optimizer: Optimizer over ``model``'s parameters.
        m_steps: Gradient steps per E-step (>= 1).

    References:
        Seibt, De Raedt, Marra. "EM-NeSy: Expectation-Maximization for Probabilistic
        Neurosymbolic Learning." arXiv:2606.14463, 2026.

    Example:
        >>> from em_nesy import AdditionDP, DigitMLP, MultiDigitAddition
        >>> model = DigitMLP()
        >>> em = EMNeSy(model, AdditionDP(MultiDigitAddition(1)),
        ...             torch.optim.Adam(model.parameters(), lr=1e-3))
        >>> out = em.train_step(torch.rand(4, 2, 8, 8), torch.tensor([[0, 7]] * 4))
        >>> sorted(out)
        ['e_time', 'loss', 'm_time', 'valid_frac']
    """

    def __init__(
        self,
        model: Callable[[Any], Logits],
        engine: InferenceEngine,
        optimizer: torch.optim.Optimizer,
        m_steps: int = 1,
    ) -> None:
        if not callable(model):
            raise TypeError(f"model must be callable, got {type(model).__name__}")
        if not hasattr(engine, "posterior"):
            raise TypeError(f"engine must have a posterior(logits, y) method, got {engine!r}")
        if isinstance(m_steps, bool) or not isinstance(m_steps, int) or m_steps < 1:
            raise ValueError(f"m_steps must be an int >= 1, got {m_steps!r}")
        self.model, self.engine, self.optimizer, self.m_steps = model, engine, optimizer, m_steps

    def train_step(self, x: Any, y: Any) -> dict[str, float]:
        """One E-step and ``m_steps`` M-steps on a batch; returns loss, valid fraction, timings."""
        logits = self.model(x)
        t0 = time.perf_counter()
        post = e_step(logits, y, self.engine)
        e_time = time.perf_counter() - t0
        t0 = time.perf_counter()
        loss = torch.zeros(())
        for m in range(self.m_steps):
            if m > 0:  # the first M-step reuses the E-step's forward pass
                logits = self.model(x)
            self.optimizer.zero_grad()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # e_step already warned for empty batches
                loss = em_loss(logits, post)
            loss.backward()
            self.optimizer.step()
        return {
            "loss": float(loss.detach()),
            "valid_frac": float(post.valid.float().mean()),
            "e_time": e_time,
            "m_time": time.perf_counter() - t0,
        }

    @torch.no_grad()
    def predict_symbols(self, x: Any) -> torch.Tensor:
        """Most probable value of each symbol, ``(B, n)``."""
        logits = self.model(x)
        if isinstance(logits, torch.Tensor):
            return logits.argmax(-1)
        return torch.stack([t.argmax(-1) for t in logits], dim=1)
