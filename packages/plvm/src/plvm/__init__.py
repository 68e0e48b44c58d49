"""Process-level latent variable models for early cross-task strategy prediction.

Predict a strategy on a new task from partial process traces of other tasks by fusing
per-task Gaussian experts over a shared latent (Kasumba, Barbour & Ho, arXiv 2605.30550).
"""

from importlib.metadata import version as _version

from plvm import baselines, sim
from plvm._plvm import PLVM
from plvm.encoders import DeepSetsEncoder, GRUEncoder
from plvm.estimator import PLVMClassifier
from plvm.evaluate import cross_task_benchmark, latent_probe_r2
from plvm.fusion import moe_moments, moe_sample, poe
from plvm.labels import mean_run_length, zone_strategy_labels
from plvm.linear import PLVMLinear
from plvm.sim import SimulatedStudy, TaskSpec, simulate_population
from plvm.traces import (
    EVENT_COLUMNS,
    FEATURES,
    TraceSet,
    outcome_summaries,
    process_statistics,
)

__version__ = _version("plvm")

__all__ = [
    "EVENT_COLUMNS",
    "FEATURES",
    "PLVM",
    "DeepSetsEncoder",
    "GRUEncoder",
    "PLVMClassifier",
    "PLVMLinear",
    "SimulatedStudy",
    "TaskSpec",
    "TraceSet",
    "__version__",
    "baselines",
    "cross_task_benchmark",
    "latent_probe_r2",
    "mean_run_length",
    "moe_moments",
    "moe_sample",
    "outcome_summaries",
    "poe",
    "process_statistics",
    "sim",
    "simulate_population",
    "zone_strategy_labels",
]
