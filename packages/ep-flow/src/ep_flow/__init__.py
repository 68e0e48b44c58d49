"""EP-Flow: formula-conditioned disordered crystal generation on transportation polytopes."""

from importlib.metadata import version as _version

from ep_flow import baselines, metrics
from ep_flow._ep_flow import EPFlow, EPFlowConfig, train_flow
from ep_flow.data import (
    PROTOTYPES,
    CrystalBatch,
    collate_crystals,
    condition_of,
    from_cif,
    make_disordered_dataset,
    make_splits,
)
from ep_flow.model import AxialGridTransformer
from ep_flow.odm import ODM, composition_to_marginals, odm_from_structure, odm_to_structure
from ep_flow.polytope import (
    canonicalize,
    decode_occupancy,
    double_center,
    marginal_error,
    rebalance_on_support,
    sinkhorn_decode,
    unsmooth,
)

__version__ = _version("ep-flow")

__all__ = [
    "ODM",
    "PROTOTYPES",
    "AxialGridTransformer",
    "CrystalBatch",
    "EPFlow",
    "EPFlowConfig",
    "__version__",
    "baselines",
    "canonicalize",
    "collate_crystals",
    "composition_to_marginals",
    "condition_of",
    "decode_occupancy",
    "double_center",
    "from_cif",
    "make_disordered_dataset",
    "make_splits",
    "marginal_error",
    "metrics",
    "odm_from_structure",
    "odm_to_structure",
    "rebalance_on_support",
    "sinkhorn_decode",
    "train_flow",
    "unsmooth",
]
