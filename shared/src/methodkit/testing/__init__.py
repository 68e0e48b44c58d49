"""Test helpers shared by package suites: numeric gradient checks and contract test classes.

Contract classes (conventions §8.5) are added here by the first package of each kind.
"""

from typing import Any

from methodkit.testing._grad import (
    assert_grad_matches_autograd,
    finite_difference_grad,
    relative_error,
)

__all__ = [
    "OptimizerContract",
    "ZerothOrderOptimizerContract",
    "assert_grad_matches_autograd",
    "finite_difference_grad",
    "relative_error",
]


def __getattr__(name: str) -> Any:
    # Lazy: the optimizer contract imports torch, and ``import methodkit.testing`` must not.
    if name in ("OptimizerContract", "ZerothOrderOptimizerContract"):
        from methodkit.testing import _optimizer_contract

        return getattr(_optimizer_contract, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
