"""Test helpers shared by package suites: numeric gradient checks and contract test classes.

Contract classes (CONTRIBUTING.md §5) are added here by the first package of each kind.
Users today: the optimizer contracts serve ema-nesterov, engine-zo and essam; the gradient
checks serve hel (autograd) and ess-flow (finite differences), and are planned for plvm's ELBO
gradient check, eva-cap's clipped-surrogate gradient and hel's finite-difference checks.
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
