"""Test helpers shared by package suites: numeric gradient checks and contract test classes.

Contract classes (CONTRIBUTING.md §5) are added here by the first package of each kind.
The chat back-end contract (:func:`check_chat_backend`, with :class:`LoopbackChatServer`, an
OpenAI-compatible server on 127.0.0.1) serves eva-agent, evochamber and preg.
:class:`EstimatorContract` (scikit-learn's ``check_estimator`` plus clone, params, pickling and
fit-twice determinism) serves hel, plvm and eo-wm. :class:`SamplerContract` (same seed, same
draws bit for bit; another seed, other draws; finite; global RNGs untouched) serves em-nesy and
ess-flow.
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
    "SamplerContract",
    "ZerothOrderOptimizerContract",
    "assert_grad_matches_autograd",
    "check_chat_backend",
    "echo_reply",
    "finite_difference_grad",
    "relative_error",
]


def __getattr__(name: str) -> Any:
    # Lazy: the optimizer and sampler contracts import torch; ``import methodkit.testing`` must not.
    if name in ("OptimizerContract", "ZerothOrderOptimizerContract"):
        from methodkit.testing import _optimizer_contract

        return getattr(_optimizer_contract, name)
    if name == "SamplerContract":
        from methodkit.testing import _sampler_contract

        return _sampler_contract.SamplerContract
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
