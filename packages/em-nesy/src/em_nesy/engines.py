"""E-step engines behind one interface: ``engine.posterior(logits, y) -> Posterior``.

Exact: :class:`Enumeration`, :class:`AdditionDP`, :class:`BeliefPropagation` (on trees),
:class:`ProbLogEngine` (``problog`` extra). Approximate: :class:`BeliefPropagation` (loopy),
:class:`RejectionSampling`, :class:`ABCSampling`. Wrappers: :class:`HardEM`,
:class:`StochasticEM`. No engine needs gradients or differentiable symbolic code.
"""

from em_nesy._base import InferenceEngine, Posterior
from em_nesy._bp import BeliefPropagation
from em_nesy._exact import AdditionDP, Enumeration
from em_nesy._problog import ProbLogEngine
from em_nesy._sampling import ABCSampling, RejectionSampling
from em_nesy._wrappers import HardEM, StochasticEM

__all__ = [
    "ABCSampling",
    "AdditionDP",
    "BeliefPropagation",
    "Enumeration",
    "HardEM",
    "InferenceEngine",
    "Posterior",
    "ProbLogEngine",
    "RejectionSampling",
    "StochasticEM",
]
