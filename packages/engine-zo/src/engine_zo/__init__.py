"""engine-zo: ENGINE, a multiscale (V-cycle) zeroth-order optimizer, and its ZO baselines.

``Engine`` replaces ``torch.optim.AdamW`` with a forward-only optimizer: ``opt.step(closure)``
where ``closure()`` returns the loss. The transformers adapter is ``engine_zo.hf`` (extra
``engine-zo[hf]``).
"""

from importlib.metadata import version as _version

from engine_zo._engine import Engine
from engine_zo.baselines import LOZO, HiZOO, MeZO, SubZero, ZOAdam
from engine_zo.samplers import LowRankSampler, SubspaceSampler

__version__ = _version("engine-zo")

__all__ = [
    "LOZO",
    "Engine",
    "HiZOO",
    "LowRankSampler",
    "MeZO",
    "SubZero",
    "SubspaceSampler",
    "ZOAdam",
    "__version__",
]
