"""hel: Hamiltonian Echo Learning and Echo Learning for recurrent networks.

An inference pass and a time-reversed, error-nudged echo pass of the same dynamics give the
BPTT gradient from local statistics, in memory independent of the sequence length.
"""

import importlib.metadata
from typing import Any

from hel._estimator import GradientEstimator
from hel._hel import EchoLearning, HamiltonianEcho
from hel._reversibility import ReversibilityReport, ReversibilityWarning
from hel.baselines import BPTT, EProp, FrozenRecurrence, TruncatedBPTT
from hel.cells import (
    ForceCell,
    HamiltonianCell,
    HopfieldOscillatorCell,
    RateEchoCell,
    leapfrog_step,
)
from hel.data import delayed_recall, load_aeon, sequential_digits, to_batch_first
from hel.homeostasis import HomeostasisAccumulator, homeostatic_loss
from hel.metrics import compare_estimators, grad_cosine, grad_relative_error
from hel.models import EchoRNN

__version__ = importlib.metadata.version("hel")

_LAZY = {"EchoRNNClassifier", "EchoRNNRegressor"}  # scikit-learn is imported on first use


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from hel import sklearn as _sk

        return getattr(_sk, name)
    raise AttributeError(f"module 'hel' has no attribute {name!r}")


__all__ = [
    "BPTT",
    "EProp",
    "EchoLearning",
    "EchoRNN",
    "EchoRNNClassifier",
    "EchoRNNRegressor",
    "ForceCell",
    "FrozenRecurrence",
    "GradientEstimator",
    "HamiltonianCell",
    "HamiltonianEcho",
    "HomeostasisAccumulator",
    "HopfieldOscillatorCell",
    "RateEchoCell",
    "ReversibilityReport",
    "ReversibilityWarning",
    "TruncatedBPTT",
    "__version__",
    "compare_estimators",
    "delayed_recall",
    "grad_cosine",
    "grad_relative_error",
    "homeostatic_loss",
    "leapfrog_step",
    "load_aeon",
    "sequential_digits",
    "to_batch_first",
]
