"""essam: Evolution Strategies with Sharpness-Aware Maximization for reward fine-tuning.

``ESSAM`` is a forward-only ``torch.optim.Optimizer``: ``opt.step(closure)`` where ``closure()``
returns a reward to maximise. ``ESSAMTrainer`` runs it on a causal LM with TRL-style reward
functions (extra ``essam[hf]``); ``essam.baselines`` holds the GRPO baselines.
"""

from importlib.metadata import version as _version

from essam._essam import ESSAM, ESSAMStepInfo, shape_rewards
from essam.trainer import ESSAMConfig, ESSAMTrainer

__version__ = _version("essam")

__all__ = [
    "ESSAM",
    "ESSAMConfig",
    "ESSAMStepInfo",
    "ESSAMTrainer",
    "__version__",
    "shape_rewards",
]
