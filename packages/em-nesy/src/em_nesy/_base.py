"""The E-step result type, the engine interface, input checks and the loss reduction they share."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

# Log-weight of an impossible state. Finite on purpose: exp() gives exactly 0, while sums of a
# few hundred of them stay finite in float32 and no NaN appears in logsumexp or its gradient.
NEG = -1e30
# Log-evidence below this value means "no consistent assignment".
NEG_THRESHOLD = -1e29

Logits = torch.Tensor | Sequence[torch.Tensor]


@dataclass
class Posterior:
    """Result of an E-step.

    Attributes:
        marginals: ``(B, n, K)`` posterior marginals ``q_i(k) = P(z_i = k | x, y)`` (rows of
            invalid examples are meaningless; padded values of smaller domains are 0).
        valid: ``(B,)`` bool, False where the engine found no consistent assignment.
        log_evidence: ``(B,)`` ``log p(y | x)`` (an estimate for samplers) or None.
        stats: Scalar statistics (acceptance rate, iterations, ...).
        samples: ``(B, S, n)`` assignments of sampling engines, else None.
        weights: ``(B, S)`` normalised weights of ``samples`` (0 rows for invalid examples).
    """

    marginals: torch.Tensor
    valid: torch.Tensor
    log_evidence: torch.Tensor | None = None
    stats: dict[str, float] = field(default_factory=dict)
    samples: torch.Tensor | None = None
    weights: torch.Tensor | None = None


@runtime_checkable
class InferenceEngine(Protocol):
    """Anything with ``posterior(logits, y) -> Posterior``; it never needs gradients."""

    def posterior(self, logits: Logits, y: Any) -> Posterior:
        """Posterior marginals of the symbols given the labels."""
        ...


def log_probs(logits: Logits, domains: Sequence[int]) -> torch.Tensor:
    """Check logits against the program's domains and return padded log-probabilities.

    Args:
        logits: ``(B, n, K)`` tensor, or a list of ``n`` tensors ``(B, K_i)``.
        domains: The program's domain sizes.

    Returns:
        ``(B, n, max K)`` log-softmax, padded with :data:`NEG`, detached.

    Raises:
        TypeError: If logits are neither a tensor nor a sequence of tensors.
        ValueError: On shape / domain mismatch or non-finite values.
    """
    n = len(domains)
    if isinstance(logits, torch.Tensor):
        if logits.ndim != 3:
            raise ValueError(f"logits must have shape (B, n, K), got {tuple(logits.shape)}")
        if logits.shape[1] != n:
            raise ValueError(f"logits have {logits.shape[1]} symbols, the program has {n}")
        if any(d != logits.shape[2] for d in domains):
            raise ValueError(
                f"logits have {logits.shape[2]} classes per symbol, the program's domains "
                f"are {tuple(domains)}"
            )
        parts = [logits[:, i] for i in range(n)]
    elif isinstance(logits, Sequence) and all(isinstance(t, torch.Tensor) for t in logits):
        parts = list(logits)
        if len(parts) != n:
            raise ValueError(f"got logits for {len(parts)} symbols, the program has {n}")
        for i, (t, d) in enumerate(zip(parts, domains, strict=True)):
            if t.ndim != 2 or t.shape[1] != d or t.shape[0] != parts[0].shape[0]:
                raise ValueError(f"logits[{i}] must have shape (B, {d}), got {tuple(t.shape)}")
    else:
        raise TypeError(f"logits must be a tensor or a list of tensors, got {type(logits)}")
    if isinstance(logits, torch.Tensor):
        t = logits.detach()
        if not torch.isfinite(t).all():
            raise ValueError("logits contain NaN or inf")
        _warn_if_probabilities([t])
        return t.log_softmax(-1)
    lp = []
    kmax = max(domains)
    for t in parts:
        t = t.detach()
        if not torch.isfinite(t).all():
            raise ValueError("logits contain NaN or inf")
        lp.append(torch.nn.functional.pad(t.log_softmax(-1), (0, kmax - t.shape[1]), value=NEG))
    _warn_if_probabilities(parts)
    return torch.stack(lp, dim=1)


def _warn_if_probabilities(parts: Sequence[torch.Tensor]) -> None:
    if all(t.shape[-1] > 1 for t in parts) and all(
        bool(t.min() >= 0) and bool(t.max() <= 1) and bool(((t.sum(-1) - 1).abs() < 1e-4).all())
        for t in parts
    ):
        warnings.warn(
            "logits look like probabilities (rows in [0, 1] summing to 1); engines expect "
            "unnormalised logits and apply softmax themselves",
            stacklevel=3,
        )


def one_hot(z: torch.Tensor, k: int, dtype: torch.dtype) -> torch.Tensor:
    """One-hot of integer states ``(..., n)`` into ``(..., n, k)``."""
    return torch.nn.functional.one_hot(z.long(), k).to(dtype)


def warn_if_all_invalid(valid: torch.Tensor, where: str) -> None:
    """Warn when no example of a batch has a consistent assignment."""
    if valid.numel() and not bool(valid.any()):
        warnings.warn(
            f"{where}: no example in the batch has a consistent assignment (impossible labels, "
            "or every sample rejected); the batch contributes nothing",
            stacklevel=3,
        )


def reduce_valid(per_example: torch.Tensor, valid: torch.Tensor, reduction: str) -> torch.Tensor:
    """Reduce per-example losses over the valid examples (``"mean"``, ``"sum"`` or ``"none"``).

    Invalid rows count as 0; a batch with no valid example gives 0 with a warning.

    Raises:
        ValueError: If ``reduction`` is unknown.
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    masked = torch.where(valid, per_example, torch.zeros_like(per_example))
    if reduction == "none":
        return masked
    if not bool(valid.any()):
        warnings.warn("no valid example in the batch: the loss is 0", stacklevel=3)
        return per_example.sum() * 0.0
    total = masked.sum()
    return total / valid.sum() if reduction == "mean" else total
