"""Token accounting and the equal-budget self-consistency size."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TokenLedger", "equal_budget_sc"]


def equal_budget_sc(n_prefixes: int, keep: int, prefix_len: int, mean_len: float) -> float:
    """Self-consistency sample count with the same expected token cost as PreG.

    ``M = N l + K (1 - l)`` with ``l = min(L / T_bar, 1)``.

    Raises:
        ValueError: non-positive sizes or ``keep > n_prefixes``.
    """
    if n_prefixes < 1 or keep < 1 or keep > n_prefixes:
        raise ValueError(f"need 1 <= keep <= n_prefixes, got keep={keep}, n_prefixes={n_prefixes}")
    if prefix_len < 1 or mean_len <= 0:
        raise ValueError(f"prefix_len and mean_len must be positive, got {prefix_len}, {mean_len}")
    ell = min(prefix_len / mean_len, 1.0)
    return n_prefixes * ell + keep * (1.0 - ell)


@dataclass
class TokenLedger:
    """Generated-token counts of one run (prompt tokens are never counted)."""

    prefix_tokens: int = 0
    completion_tokens: int = 0

    def add_prefix(self, n: int) -> None:
        """Count ``n`` tokens generated in a prefix stage."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        self.prefix_tokens += n

    def add_completion(self, n: int) -> None:
        """Count ``n`` tokens generated after the prefix stage."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        self.completion_tokens += n

    @property
    def total_tokens(self) -> int:
        """All generated tokens."""
        return self.prefix_tokens + self.completion_tokens
