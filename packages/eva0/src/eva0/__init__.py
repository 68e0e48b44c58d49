"""EVA-0: backpropagation-free test-time adaptation with two forward passes per batch.

Public API: :class:`EVA0` (the method), :func:`adapt_stream` (evaluation loop), and the
submodules ``losses``, ``perturb``, ``outputs``, ``baselines``, ``models``,
``corruptions``.
"""

from importlib.metadata import version as _version

from eva0 import baselines, corruptions, losses, models, outputs, perturb
from eva0._eva0 import EVA0, EVA0Stats
from eva0.stream import adapt_stream

__version__ = _version("eva0")

__all__ = [
    "EVA0",
    "EVA0Stats",
    "__version__",
    "adapt_stream",
    "baselines",
    "corruptions",
    "losses",
    "models",
    "outputs",
    "perturb",
]
