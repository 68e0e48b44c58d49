"""methodkit: the small core every neurips26 package depends on.

Importing it is cheap: numpy and tqdm only. Helpers that need torch, matplotlib or
scikit-learn live in the submodules ``methodkit.torch``, ``methodkit.bench``,
``methodkit.data`` and ``methodkit.testing`` and import those libraries lazily.
"""

from importlib.metadata import version as _version

from methodkit._progress import progress, progress_wanted
from methodkit._seeding import derive_seed, rng, seed_everything

__version__ = _version("methodkit")

__all__ = [
    "__version__",
    "derive_seed",
    "progress",
    "progress_wanted",
    "rng",
    "seed_everything",
]
