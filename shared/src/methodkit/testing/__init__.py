"""Test helpers shared by package suites: numeric gradient checks and contract test classes.

Contract classes (conventions §8.5) are added here by the first package of each kind.
"""

from methodkit.testing._grad import (
    assert_grad_matches_autograd,
    assert_grad_matches_finite_differences,
    finite_difference_grad,
    relative_error,
)

__all__ = [
    "assert_grad_matches_autograd",
    "assert_grad_matches_finite_differences",
    "finite_difference_grad",
    "relative_error",
]
