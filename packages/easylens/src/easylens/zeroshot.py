"""Zero-shot lesion scoring ``s(I) = cos(g, t+) - cos(g, t-)`` (scikit-learn style)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.nn import functional as nnf

from easylens._easylens import text_direction
from easylens._validation import check_positive_int
from methodkit import progress as show_progress


class ZeroShotDetector:
    """Score images against positive and negative prompts with any image encoder.

    Args:
        encoder_or_lens: An :class:`~easylens.EasyLens`, a baseline, or an adapter: anything
            with ``encode_image`` and ``encode_text``.
        positive_prompts: Lesion reports (``t+`` is their normalised mean embedding).
        negative_prompts: Normal reports (``t-``).
        batch_size: Images per forward.
        progress: Progress bar over the batches of :meth:`decision_function` (None: on a
            terminal only).
    """

    def __init__(
        self,
        encoder_or_lens: Any,
        positive_prompts: Sequence[str],
        negative_prompts: Sequence[str],
        batch_size: int = 64,
        progress: bool | None = None,
    ) -> None:
        for name in ("encode_image", "encode_text"):
            if not hasattr(encoder_or_lens, name):
                raise TypeError(
                    f"encoder_or_lens needs .{name}, {type(encoder_or_lens).__name__} has none"
                )
        self.encoder = encoder_or_lens
        self.batch_size = check_positive_int(batch_size, "batch_size")
        with torch.no_grad():
            self.t_pos = text_direction(encoder_or_lens, positive_prompts)
            self.t_neg = text_direction(encoder_or_lens, negative_prompts)
        self.progress = progress

    def fit(self, X: Any = None, y: Any = None) -> ZeroShotDetector:
        """No-op (zero-shot); returns self."""
        return self

    def score_embeddings(self, g: torch.Tensor) -> np.ndarray:
        """``s`` for image embeddings ``[B, E]``."""
        g = nnf.normalize(g.float(), dim=-1)
        return (g @ self.t_pos - g @ self.t_neg).cpu().numpy().astype(np.float64)

    @torch.no_grad()
    def decision_function(self, images: torch.Tensor) -> np.ndarray:
        """Lesion scores ``[B]`` (higher = more likely a lesion)."""
        if not isinstance(images, torch.Tensor):
            raise TypeError(f"images must be a torch.Tensor, got {type(images).__name__}")
        if images.ndim == 0 or len(images) == 0:
            raise ValueError(
                f"images is an empty batch (shape {tuple(images.shape)}); pass at least one image"
            )
        starts = show_progress(
            range(0, len(images), self.batch_size),
            enabled=self.progress,
            desc="ZeroShotDetector",
        )
        out = [
            self.score_embeddings(self.encoder.encode_image(images[i : i + self.batch_size]))
            for i in starts
        ]
        return np.concatenate(out)
