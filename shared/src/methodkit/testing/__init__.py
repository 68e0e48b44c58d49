"""Test helpers shared by package suites: numeric gradient checks and contract test classes.

Contract classes (CONTRIBUTING.md §5) are added here by the first package of each kind.
The chat back-end contract (:func:`check_chat_backend`, with :class:`LoopbackChatServer`, an
OpenAI-compatible server on 127.0.0.1) serves eva-agent, evochamber and preg.
:class:`EstimatorContract` (scikit-learn's ``check_estimator`` plus clone, params, pickling and
fit-twice determinism) serves hel, plvm and eo-wm.
Users today: the optimizer contracts serve ema-nesterov, engine-zo and essam; the gradient
checks serve hel (autograd) and ess-flow (finite differences), and are planned for plvm's ELBO
gradient check, eva-cap's clipped-surrogate gradient and hel's finite-difference checks.
"""

from typing import Any

from methodkit.testing._chat_contract import LoopbackChatServer, check_chat_backend, echo_reply
from methodkit.testing._estimator_contract import EstimatorContract
from methodkit.testing._grad import (
    assert_grad_matches_autograd,
    finite_difference_grad,
    relative_error,
)

__all__ = [
    "EstimatorContract",
    "LoopbackChatServer",
    "OptimizerContract",
    "ZerothOrderOptimizerContract",
    "assert_grad_matches_autograd",
    "check_chat_backend",
    "echo_reply",
    "finite_difference_grad",
    "relative_error",
]


def __getattr__(name: str) -> Any:
    # Lazy: the optimizer contract imports torch, and ``import methodkit.testing`` must not.
    if name in ("OptimizerContract", "ZerothOrderOptimizerContract"):
        from methodkit.testing import _optimizer_contract

        return getattr(_optimizer_contract, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
