"""EasyLens: a training-free subtle-lesion amplifier for frozen CLIP-style medical encoders.

EasyBank (lesion prototypes + anatomy-aware normal references), EasyTag (counterfactual
prototype reasoning) and EasyAmplifier (morphology-guided residual enhancement) wrap any
ViT-style encoder through an adapter (open_clip, Hugging Face CLIP/SigLIP, timm, generic).
Paper: arXiv 2606.06379. Every equation is inferred from the abstract.
"""

from importlib.metadata import version as _version

from easylens import baselines
from easylens._easylens import EasyLens, LensReport
from easylens.adapters import (
    GenericViTAdapter,
    HFCLIPAdapter,
    OpenCLIPAdapter,
    TimmViTAdapter,
    TokenEncoderAdapter,
)
from easylens.amplifier import EasyAmplifier, morphology_weights
from easylens.bank import EasyBank
from easylens.metrics import auprc, auroc, tag_precision_recall
from easylens.synthetic import (
    ScanBatch,
    ScanGenerator,
    TinyCLIP,
    tiny_clip_adapter,
    train_tiny_clip,
)
from easylens.tag import EasyTag, TagResult
from easylens.zeroshot import ZeroShotDetector

__version__ = _version("easylens")

__all__ = [
    "EasyAmplifier",
    "EasyBank",
    "EasyLens",
    "EasyTag",
    "GenericViTAdapter",
    "HFCLIPAdapter",
    "LensReport",
    "OpenCLIPAdapter",
    "ScanBatch",
    "ScanGenerator",
    "TagResult",
    "TimmViTAdapter",
    "TinyCLIP",
    "TokenEncoderAdapter",
    "ZeroShotDetector",
    "__version__",
    "auprc",
    "auroc",
    "baselines",
    "morphology_weights",
    "tag_precision_recall",
    "tiny_clip_adapter",
    "train_tiny_clip",
]
