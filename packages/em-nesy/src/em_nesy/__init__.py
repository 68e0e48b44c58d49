"""EM-NeSy: expectation-maximization for probabilistic neurosymbolic learning.

The network predicts latent symbols, a symbolic program relates them to the label; training
alternates an E-step (posterior over the symbols given the label, by any inference engine,
no gradients) with an M-step (soft cross-entropy to that posterior through the network only).
"""

from importlib.metadata import version as _version

from em_nesy._em_nesy import EMNeSy, e_step, em_loss, em_loss_from_samples
from em_nesy.baselines import nesy_nll
from em_nesy.data import AdditionDataset, load_digit_images, make_addition_dataset
from em_nesy.engines import (
    ABCSampling,
    AdditionDP,
    BeliefPropagation,
    Enumeration,
    HardEM,
    InferenceEngine,
    Posterior,
    ProbLogEngine,
    RejectionSampling,
    StochasticEM,
)
from em_nesy.factors import Factor, FactorGraph
from em_nesy.metrics import digit_accuracy, sum_accuracy
from em_nesy.models import DigitCNN, DigitMLP
from em_nesy.programs import FunctionProgram, MultiDigitAddition, SymbolicProgram

__version__ = _version("em-nesy")

__all__ = [
    "ABCSampling",
    "AdditionDP",
    "AdditionDataset",
    "BeliefPropagation",
    "DigitCNN",
    "DigitMLP",
    "EMNeSy",
    "Enumeration",
    "Factor",
    "FactorGraph",
    "FunctionProgram",
    "HardEM",
    "InferenceEngine",
    "MultiDigitAddition",
    "Posterior",
    "ProbLogEngine",
    "RejectionSampling",
    "StochasticEM",
    "SymbolicProgram",
    "__version__",
    "digit_accuracy",
    "e_step",
    "em_loss",
    "em_loss_from_samples",
    "load_digit_images",
    "make_addition_dataset",
    "nesy_nll",
    "sum_accuracy",
]
