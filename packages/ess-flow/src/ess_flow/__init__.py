"""ess-flow: gradient-free posterior sampling in the source space of flow-matching generators.

Elliptical slice sampling on the Gaussian source ``z`` of a deterministic generator
``x = T(z)``, with target ``pi(z) ∝ g(y | T(z)) N(z; 0, I)``; only forward passes are needed.
"""

from importlib.metadata import version as _version

from ess_flow._ess_flow import ESSFlow, elliptical_slice_step
from ess_flow.baselines import (
    PCNResult,
    SIRResult,
    dps_flow_sample,
    dps_guidance,
    pcn_sample,
    sir_sample,
)
from ess_flow.diagnostics import (
    effective_sample_size,
    ess_bulk,
    ess_tail,
    kabsch_rmsd,
    mmd_rbf,
    rank_rhat,
    rhat,
    sliced_wasserstein,
)
from ess_flow.generators import (
    FlowGenerator,
    NoiseAugmentedGenerator,
    from_callable,
    from_flow_matching,
    from_torchcfm,
)
from ess_flow.likelihoods import (
    ContactLikelihood,
    DistanceLikelihood,
    GaussianLikelihood,
    IndicatorLikelihood,
    PropertyTargetLikelihood,
    QuantizedGaussianLikelihood,
    SumLikelihood,
    Tempered,
)
from ess_flow.result import ESSFlowResult, MixingWarning, check_mixing, mixing_report
from ess_flow.training import MLPVelocity, train_flow_matching

__version__ = _version("ess-flow")

__all__ = [
    "ContactLikelihood",
    "DistanceLikelihood",
    "ESSFlow",
    "ESSFlowResult",
    "FlowGenerator",
    "GaussianLikelihood",
    "IndicatorLikelihood",
    "MLPVelocity",
    "MixingWarning",
    "NoiseAugmentedGenerator",
    "PCNResult",
    "PropertyTargetLikelihood",
    "QuantizedGaussianLikelihood",
    "SIRResult",
    "SumLikelihood",
    "Tempered",
    "__version__",
    "check_mixing",
    "dps_flow_sample",
    "dps_guidance",
    "effective_sample_size",
    "elliptical_slice_step",
    "ess_bulk",
    "ess_tail",
    "from_callable",
    "from_flow_matching",
    "from_torchcfm",
    "kabsch_rmsd",
    "mixing_report",
    "mmd_rbf",
    "pcn_sample",
    "rank_rhat",
    "rhat",
    "sir_sample",
    "sliced_wasserstein",
    "train_flow_matching",
]
