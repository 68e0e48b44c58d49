"""edit-ris: zero-shot referring image segmentation from one step of an image-editing model.

The earliest denoising step of an instruction-based image-editing diffusion model grounds the
referring expression (He et al., arXiv:2605.13122).
"""

from importlib.metadata import version as _version

from edit_ris import baselines, metrics
from edit_ris._edit_ris import (
    EditRIS,
    RISOutput,
    feature_affinity,
    minmax,
    propagate_affinity,
    prototype_probabilities,
    spherical_kmeans,
)
from edit_ris.backbones import (
    Capture,
    CaptureError,
    CaptureSpec,
    DiffusersIP2PBackbone,
    EditingBackbone,
    LayerInfo,
    TinyEditor,
    TokenBatch,
    WordTokenizer,
    train_tiny_editor,
)
from edit_ris.data import ShapeRefGenerator, ShapeRefItem
from edit_ris.metrics import iou, miou, oiou, precision_at
from edit_ris.probe import separability_curve
from edit_ris.tokens import STOP_WORDS, expression_token_span, strip_article

__version__ = _version("edit-ris")

__all__ = [
    "STOP_WORDS",
    "Capture",
    "CaptureError",
    "CaptureSpec",
    "DiffusersIP2PBackbone",
    "EditRIS",
    "EditingBackbone",
    "LayerInfo",
    "RISOutput",
    "ShapeRefGenerator",
    "ShapeRefItem",
    "TinyEditor",
    "TokenBatch",
    "WordTokenizer",
    "__version__",
    "baselines",
    "expression_token_span",
    "feature_affinity",
    "iou",
    "metrics",
    "minmax",
    "miou",
    "oiou",
    "precision_at",
    "propagate_affinity",
    "prototype_probabilities",
    "separability_curve",
    "spherical_kmeans",
    "strip_article",
    "train_tiny_editor",
]
