"""methodkit: the small core every neurips26 package depends on.

Importing it is cheap: numpy and tqdm only. Helpers that need torch, matplotlib or
scikit-learn live in the submodules ``methodkit.torch``, ``methodkit.bench``,
``methodkit.data`` and ``methodkit.testing`` and import those libraries lazily.
"""

from importlib.metadata import version as _version

from methodkit._logging import get_logger, setup_logging
from methodkit._progress import progress
from methodkit._seeding import rng, seed_everything

__version__ = _version("methodkit")

__all__ = [
    "__version__",
    "get_logger",
    "progress",
    "rng",
    "seed_everything",
    "setup_logging",
]
